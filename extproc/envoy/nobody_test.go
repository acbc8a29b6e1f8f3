package envoy_test

import (
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
)

// TestResponseWithoutBody checks responses whose headers end the stream: Envoy then sends
// no body message, so the error must be answered at the headers, in our envelope, with
// the hold released.
func TestResponseWithoutBody(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		w      want
	}{
		{"upstream 503 without body", 503, want{503, "service_unavailable", "api_error", "", false, ""}},
		{"upstream 401 without body", 401, want{503, "upstream_account_unavailable", "api_error", "", true, ""}},
		{"upstream 500 without body", 500, want{502, "upstream_error", "api_error", "", false, ""}},
		{"success without body", 200, want{502, "upstream_error", "api_error", "", false, ""}},
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
