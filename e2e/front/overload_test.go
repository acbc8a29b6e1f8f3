package front

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	downstreamconnv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	"github.com/llmgw/gateway/e2e/internal/bootstraptest"
)

// TestOverloadConnectionLimit: past global_downstream_max_connections, a new connection
// is closed at accept, as Envoy's listener does; one more is accepted once one closes.
func TestOverloadConnectionLimit(t *testing.T) {
	h := newHarness(t, nil, func(s *session) error {
		s.next()
		return s.send(immediate(200, `{"object":"list","data":[]}`, "extproc models list"))
	},
		func(b *bootstraptest.Bootstrap) {
			bootstraptest.ResourceMonitor(b, "envoy.resource_monitors.global_downstream_max_connections",
				func(c *downstreamconnv3.DownstreamConnectionsConfig) { c.MaxActiveDownstreamConnections = 2 })
		})
	addr := h.front.Listener.Addr().String()
	var open []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
	}
	// The two connections above are accepted (their HTTP/1 server is waiting for a
	// request); a third is closed without an answer.
	refused := func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return true
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
		_, err = http.ReadResponse(bufio.NewReader(c), nil)
		return err != nil
	}
	if !refused() {
		t.Fatal("a third connection was served past the limit of 2")
	}
	_ = open[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for refused() {
		if time.Now().After(deadline) {
			t.Fatal("no connection accepted after one of the two closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOverloadStopsAcceptingRequests: with the heap over stop_accepting_requests'
// threshold, a request is answered 503 in our envelope before any filter: ext_proc never
// sees it.
func TestOverloadStopsAcceptingRequests(t *testing.T) {
	h := newHarness(t, nil, nil, func(b *bootstraptest.Bootstrap) {
		bootstraptest.ResourceMonitor(b, "envoy.resource_monitors.fixed_heap",
			func(c *fixedheapv3.FixedHeapConfig) { c.MaxHeapSizeBytes = 1024 })
	})
	status, hdr, body := h.do(t, http.MethodPost, "/v1/chat/completions", map[string]string{"content-type": "application/json"},
		strings.NewReader(`{"model":"m","messages":[]}`))
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"service_unavailable"`) ||
		!strings.Contains(string(body), "overloaded") || hdr.Get("x-should-retry") != "false" {
		t.Fatalf("got %d %v %s, want 503 service_unavailable in our envelope", status, hdr, body)
	}
	status, _, body = h.do(t, http.MethodPost, "/v1/messages", map[string]string{"content-type": "application/json"}, strings.NewReader(`{}`))
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), `"type":"overloaded_error"`) {
		t.Fatalf("messages: got %d %s, want the Anthropic envelope", status, body)
	}
	select {
	case <-h.proc.sessions:
		t.Fatal("ext_proc saw a request while the overload manager stops accepting them")
	default:
	}
}
