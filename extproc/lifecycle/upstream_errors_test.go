package lifecycle_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/llmgw/gateway/extproc/lifecycle"
)

// TestBedrockErrorTypeHeader: Bedrock names its error only in x-amzn-ErrorType; the
// client gets the code the other providers' errors of that kind get (a refused request
// is 400 invalid_request, not 502), whether the body follows or not.
func TestBedrockErrorTypeHeader(t *testing.T) {
	ctx := context.Background()
	const ns = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
	for _, tc := range []struct {
		typ        string
		status     int
		noBody     bool
		wantStatus int
		wantCode   string
	}{
		{typ: "ValidationException", status: 400, wantStatus: 400, wantCode: "invalid_request"},
		{typ: "ValidationException", status: 400, noBody: true, wantStatus: 400, wantCode: "invalid_request"},
		{typ: "ServiceQuotaExceededException", status: 400, wantStatus: 503, wantCode: "upstream_account_unavailable"},
		{typ: "ModelNotReadyException", status: 429, wantStatus: 503, wantCode: "service_unavailable"},
		{typ: "ModelErrorException", status: 424, wantStatus: 502, wantCode: "upstream_error"},
	} {
		t.Run(tc.typ+map[bool]string{true: " without a body"}[tc.noBody], func(t *testing.T) {
			svc := credService(t)
			r := svc.NewRequest()
			r.RequestHeaders(ctx, secHeaders("/v1/chat/completions"), false)
			if b := r.RequestBody(ctx, []byte(`{"model":"m-aws","messages":[{"role":"user","content":"hi"}]}`), true); b.Immediate != nil {
				t.Fatalf("refused: %s", b.Immediate.Body)
			}
			defer r.End(ctx, "done")
			hs := []lifecycle.Header{{":status", strconv.Itoa(tc.status)}, {"content-type", "application/json"}, {"x-amzn-errortype", tc.typ + ns}}
			a := r.ResponseHeaders(ctx, tc.status, hs, tc.noBody)
			if !tc.noBody {
				a = r.ResponseBody(ctx, []byte(`{"message":"words of Bedrock"}`), true)
			}
			if a.Immediate == nil {
				t.Fatalf("no error answer: %+v", a)
			}
			var e struct{ Error struct{ Code string } }
			if err := json.Unmarshal(a.Immediate.Body, &e); err != nil || a.Immediate.Status != tc.wantStatus || e.Error.Code != tc.wantCode {
				t.Fatalf("%d %s, want %d %s", a.Immediate.Status, a.Immediate.Body, tc.wantStatus, tc.wantCode)
			}
		})
	}
}
