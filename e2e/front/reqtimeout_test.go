package front

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/llmgw/gateway/e2e/internal/bootstraptest"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestRequestTimeout checks the emulation of the HCM request_timeout: a client that
// sends its headers and then trickles its body is answered 408 once the timeout has run,
// and nothing reaches the upstream; a request received in time is served even though
// its answer arrives after the timeout would have run (the timer stops with the request).
func TestRequestTimeout(t *testing.T) {
	answer := make(chan struct{})
	upstreamHits := make(chan struct{}, 4)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamHits <- struct{}{}
		<-answer // released once the slow client has had its 408
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	})
	h := newHarness(t, upstream, func(s *session) error {
		for m := s.next(); m != nil; m = s.next() {
			switch {
			case m.GetRequestHeaders() != nil:
				_ = s.send(routeTo("mock-providers"))
			case m.GetRequestBody() != nil:
				_ = s.send(reqBodyReply(nil))
			case m.GetResponseHeaders() != nil:
				_ = s.send(respHeadersReply(nil))
			}
		}
		return nil
	}, func(b *bootstraptest.Bootstrap) {
		b.HCM(func(h *hcmv3.HttpConnectionManager) { h.RequestTimeout = durationpb.New(300 * time.Millisecond) })
	})

	// A request whose body never ends.
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte("{")) }()
	req, err := http.NewRequest("POST", h.front.URL+"/v1/chat/completions", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("slow body answered %d, want 408", resp.StatusCode)
	}
	// Envoy's own reply, in our envelope (local_reply_config).
	if !strings.Contains(string(body), `"code":"invalid_request"`) || !strings.Contains(string(body), "request timeout") {
		t.Errorf("408 body = %s, want our envelope", body)
	}
	select {
	case <-upstreamHits:
		t.Fatal("the slow request reached the upstream")
	default:
	}

	// A whole request, answered late: the response is not cut.
	done := make(chan int, 1)
	go func() {
		code, _, _ := h.do(t, "POST", "/v1/chat/completions", map[string]string{"Content-Type": "application/json"}, strings.NewReader(`{}`))
		done <- code
	}()
	<-upstreamHits
	// The upstream holds the answer until another request has run into the timeout:
	// by then the first request's timer would have fired too, were it still armed.
	pr2, pw2 := io.Pipe()
	defer pw2.Close()
	req2, _ := http.NewRequest("POST", h.front.URL+"/v1/chat/completions", pr2)
	go func() { _, _ = pw2.Write([]byte("{")) }()
	resp2, err := http.DefaultClient.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp2.Body.Close()
	if resp2.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("second slow body answered %d, want 408", resp2.StatusCode)
	}
	close(answer)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("a request received in time answered %d after the timeout", code)
	}
}
