package lifecycle_test

import (
	"context"
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/internal/testkit"
)

// TestRoutingErrors: a path the gateway does not serve, or a method its endpoint does
// not take, is refused at the headers in the endpoint's envelope, before any key is
// looked up.
func TestRoutingErrors(t *testing.T) {
	tests := []struct {
		name, method, path string
		w                  testkit.APIError
		anthropic          bool
	}{
		{name: "unknown path", method: "POST", path: "/v1/nope", w: testkit.WantError(404, "not_found", "invalid_request_error")},
		{name: "no version prefix", method: "POST", path: "/chat/completions", w: testkit.WantError(404, "not_found", "invalid_request_error")},
		{name: "chat with GET", method: "GET", path: "/v1/chat/completions", w: testkit.WantError(405, "method_not_allowed", "invalid_request_error")},
		{name: "models with POST", method: "POST", path: "/v1/models?x=1", w: testkit.WantError(405, "method_not_allowed", "invalid_request_error")},
		{name: "messages with GET", method: "GET", path: "/v1/messages", anthropic: true, w: testkit.WantError(405, "method_not_allowed", "invalid_request_error")},
	}
	f := replay.DemoLedger()
	svc := replay.Service(t, f)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := svc.NewRequest()
			a := r.RequestHeaders(context.Background(), []lifecycle.Header{{":method", tt.method}, {":path", tt.path}}, tt.method == "GET")
			checkRefused(t, a.Immediate, tt.w, tt.anthropic)
			finish(t, svc, r)
		})
	}
	if f.Auths != 0 {
		t.Errorf("routing errors called Authenticate %d times", f.Auths)
	}
}
