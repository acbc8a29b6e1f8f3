package envoy_test

import (
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/internal/testkit"
)

// TestResponseWithoutBody checks responses whose headers end the stream: Envoy then sends
// no body message, so the error must be answered at the headers, in our envelope, with
// the hold released.
func TestResponseWithoutBody(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		w      testkit.APIError
	}{
		{"upstream 503 without body", 503, testkit.WantError(503, "service_unavailable", "api_error")},
		{"upstream 401 without body", 401, testkit.WantError(503, "upstream_account_unavailable", "api_error").WithRetry("")},
		{"upstream 500 without body", 500, testkit.WantError(502, "upstream_error", "api_error")},
		{"success without body", 200, testkit.WantError(502, "upstream_error", "api_error")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			h := replay.Start(t, replay.Service(t, f))
			x := admit(t, h, chatOK)
			msg := replay.ResponseHeaders(tt.status, "content-type", "application/json")
			msg.GetResponseHeaders().EndOfStream = true
			r := x.Send(msg)
			checkError(t, r, tt.w, false)
			x.Close()
			if _, commits, releases := f.Counts(); commits != 0 || releases != 1 {
				t.Errorf("commits %d releases %d", commits, releases)
			}
		})
	}
}
