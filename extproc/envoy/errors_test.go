package envoy_test

import (
	"context"

	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/internal/testkit"
)

// The keys of replay.DemoLedger.
const (
	keyPaid    = replay.KeyPaid
	keyNew     = replay.KeyNew
	keyScoped  = replay.KeyScoped
	keyUnknown = replay.KeyUnknown
	keyEnterp  = replay.KeyEnterprise
)

func newFake() *replay.FakeLedger { return replay.DemoLedger() }

// checkError asserts an immediate error response: w in the OpenAI (anthropic=false) or
// Anthropic envelope, with details naming the code and every header in raw_value.
func checkError(t *testing.T, resp *extprocv3.ProcessingResponse, w testkit.APIError, anthropic bool) {
	t.Helper()
	ir := resp.GetImmediateResponse()
	if ir == nil {
		t.Fatalf("want immediate %d %s, got %v", w.Status, w.Code, resp)
	}
	if ir.GetDetails() != "extproc_"+w.Code {
		t.Errorf("details = %q", ir.GetDetails())
	}
	w.Check(t, int(ir.GetStatus().GetCode()), testkit.MutationHeaders(t, ir.GetHeaders()), ir.GetBody(), anthropic)
}

func bearer(k string) []string { return []string{"authorization", "Bearer " + k} }

const chatOK = `{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`

// TestImmediateErrorProtocol: a refusal reaches Envoy as one ImmediateResponse carrying
// the lifecycle's answer as it is: status, every header in raw_value with append false
// (Envoy reads nothing else), body and details; before a refusal of the body, the
// headers reply only removes the routing, proxy and credential headers. Which requests
// are refused, and with what, is the lifecycle's behaviour, tested through its own API
// in extproc/lifecycle (TestChatCompletionsAdmissionErrors, TestMessagesErrors,
// TestRoutingErrors, ...); the dynamic metadata has its own test (metadata_test.go).
func TestImmediateErrorProtocol(t *testing.T) {
	const path = "/v1/chat/completions"
	tests := []struct {
		name      string
		body      string
		headers   []string
		reserveE  error
		atHeaders bool
	}{
		{name: "refused at the headers (no key)", body: chatOK, atHeaders: true},
		{name: "refused at the body (invalid JSON)", body: `{"model":`, headers: bearer(keyPaid)},
		{name: "refused by the ledger, with retry-after", body: chatOK, headers: bearer(keyPaid),
			reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, RetryAfter: 17, Limit: "rpm"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := []*extprocv3.ProcessingRequest{
				replay.PostHeaders(path, len(tt.body), tt.headers...),
				replay.RequestBody([]byte(tt.body), true),
			}
			if tt.atHeaders {
				msgs = msgs[:1]
			}
			// The lifecycle's own answer to the same messages.
			lf := newFake()
			lf.ReserveE = tt.reserveE
			r := replay.Service(t, lf).NewRequest()
			ctx := context.Background()
			var hs []lifecycle.Header
			for _, h := range msgs[0].GetRequestHeaders().GetHeaders().GetHeaders() {
				hs = append(hs, lifecycle.Header{Name: h.GetKey(), Value: string(h.GetRawValue())})
			}
			a := r.RequestHeaders(ctx, hs, false)
			if !tt.atHeaders {
				a = r.RequestBody(ctx, []byte(tt.body), true)
			}
			r.End(ctx, "done")
			if a.Immediate == nil {
				t.Fatal("the lifecycle admitted the request")
			}
			var want []*extprocv3.ProcessingResponse
			if !tt.atHeaders {
				want = append(want, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
					RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
						HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: []string{"x-gateway-upstream", "x-forwarded-proto", "authorization"}}}}}})
			}
			want = append(want, immediateOf(a.Immediate))

			f := newFake()
			f.ReserveE = tt.reserveE
			x := replay.Start(t, replay.Service(t, f)).Open(t)
			var got []*extprocv3.ProcessingResponse
			for _, m := range msgs {
				got = append(got, x.Send(m))
			}
			x.Close()
			if d := cmp.Diff(want, got, protocmp.Transform(), protocmp.IgnoreFields(&extprocv3.ProcessingResponse{}, "dynamic_metadata")); d != "" {
				t.Errorf("messages to Envoy (-want +got):\n%s", d)
			}
		})
	}
}

// immediateOf is the ImmediateResponse that carries im to Envoy.
func immediateOf(im *lifecycle.Immediate) *extprocv3.ProcessingResponse {
	set := make([]*corev3.HeaderValueOption, 0, len(im.Headers))
	for _, h := range im.Headers {
		set = append(set, &corev3.HeaderValueOption{
			Header: &corev3.HeaderValue{Key: h.Name, RawValue: []byte(h.Value)},
			//lint:ignore SA1019 ext_proc honours append, not append_action
			Append: wrapperspb.Bool(false),
		})
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(im.Status)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: set},
			Body:    im.Body,
			Details: im.Details,
		}}}
}
