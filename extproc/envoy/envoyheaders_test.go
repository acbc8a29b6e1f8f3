package envoy_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
)

// clientEnvoyHeaders are x-envoy-* headers a client may send to steer Envoy's router
// (retries, timeouts, hedging) or to look internal, plus one Envoy does not know.
var clientEnvoyHeaders = []string{
	"x-envoy-retry-on", "5xx,retriable-status-codes",
	"x-envoy-retriable-status-codes", "429",
	"x-envoy-max-retries", "3",
	"x-envoy-upstream-rq-timeout-ms", "1",
	"x-envoy-upstream-rq-per-try-timeout-ms", "1",
	"x-envoy-hedge-on-per-try-timeout", "true",
	"x-envoy-internal", "true",
	"x-envoy-max-retries", "9", // a repeated header is removed once, by name
	"x-envoy-anything-else", "1",
}

func envoyHeaderNames() []string {
	var names []string
	for i := 0; i < len(clientEnvoyHeaders); i += 2 {
		if !slices.Contains(names, clientEnvoyHeaders[i]) {
			names = append(names, clientEnvoyHeaders[i])
		}
	}
	return names
}

// checkRemovesEnvoyHeaders asserts that a reply removes every client x-envoy-* header
// (each once) and the client's routing header, and sets no x-envoy-* header.
func checkRemovesEnvoyHeaders(t *testing.T, c *extprocv3.CommonResponse) {
	t.Helper()
	rm := c.GetHeaderMutation().GetRemoveHeaders()
	for _, name := range append(envoyHeaderNames(), lifecycle.RoutingHeader) {
		if n := countOf(rm, name); n != 1 {
			t.Errorf("reply removes %s %d times, want once (removes %v)", name, n, rm)
		}
	}
	for _, s := range c.GetHeaderMutation().GetSetHeaders() {
		if strings.HasPrefix(s.GetHeader().GetKey(), "x-envoy") {
			t.Errorf("reply sets %s", s.GetHeader().GetKey())
		}
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

func TestClientEnvoyHeadersRemoved(t *testing.T) {
	tests := []struct {
		name string
		path string
		body string
		// extra headers besides the key and the x-envoy-* set.
		extra []string
	}{
		{name: "chat completion", path: "/v1/chat/completions", body: `{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`},
		{name: "chat to a failing upstream", path: "/v1/chat/completions", body: `{"model":"demo-exhausted","messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages", path: "/v1/messages", body: `{"model":"demo-claude","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "with a forged routing header", path: "/v1/chat/completions", body: `{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`,
			extra: []string{lifecycle.RoutingHeader, "openai", "x-forwarded-for", "10.0.0.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := replay.Start(t, replay.Service(t, newFake()))
			headers := append(append(bearer(keyPaid), clientEnvoyHeaders...), tt.extra...)
			x, hdr, bdy := h.Post(t, tt.path, []byte(tt.body), headers...)
			defer x.Close()
			if hdr.GetRequestHeaders() == nil || bdy.GetRequestBody() == nil {
				t.Fatalf("replies %v / %v, want the request to go on", hdr, bdy)
			}
			checkRemovesEnvoyHeaders(t, hdr.GetRequestHeaders().GetResponse())
			// The client's address stays with the gateway.
			if slices.Contains(tt.extra, "x-forwarded-for") &&
				!slices.Contains(hdr.GetRequestHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(), "x-forwarded-for") {
				t.Error("x-forwarded-for is not removed")
			}
			// The body reply routes the request; it must not put any x-envoy-* back.
			for _, s := range bdy.GetRequestBody().GetResponse().GetHeaderMutation().GetSetHeaders() {
				if strings.HasPrefix(s.GetHeader().GetKey(), "x-envoy") {
					t.Errorf("body reply sets %s", s.GetHeader().GetKey())
				}
			}
			if hs := setHeaders(t, bdy.GetRequestBody().GetResponse()); hs[lifecycle.RoutingHeader] != "mock-providers" {
				t.Errorf("routed to %q", hs[lifecycle.RoutingHeader])
			}
		})
	}
}

func TestClientEnvoyHeadersRemovedOnVideoTaskGet(t *testing.T) {
	f := newFake()
	f.SetTask(lifecycle.VideoTask{VideoTask: ledger.VideoTask{TaskID: "vid_1", KeyID: "k-paid", AccountID: "a1", Model: "demo-video"}, Age: time.Hour})
	h := replay.Start(t, replay.Service(t, f))
	x := h.Open(t)
	defer x.Close()
	kv := append([]string{":method", "GET", ":path", "/v1/videos/vid_1", "authorization", "Bearer " + keyPaid}, clientEnvoyHeaders...)
	r := x.Send(replay.RequestHeaders(true, kv...))
	c := r.GetRequestHeaders().GetResponse()
	if c == nil || !c.GetClearRouteCache() {
		t.Fatalf("reply %v, want the task routed upstream", r)
	}
	checkRemovesEnvoyHeaders(t, c)
	if hs := setHeaders(t, c); hs["accept-encoding"] != "identity" {
		t.Errorf("accept-encoding %q, want identity asked of the upstream", hs["accept-encoding"])
	}
}

func TestClientEnvoyHeadersOnImmediateAnswer(t *testing.T) {
	// An answer extproc gives itself goes nowhere: no mutation is needed or sent.
	h := replay.Start(t, replay.Service(t, newFake()))
	x := h.Open(t)
	defer x.Close()
	kv := append([]string{":method", "GET", ":path", "/v1/models", "authorization", "Bearer " + keyPaid}, clientEnvoyHeaders...)
	if r := x.Send(replay.RequestHeaders(true, kv...)); r.GetImmediateResponse() == nil {
		t.Fatalf("reply %v, want the models list as an immediate response", r)
	}
}
