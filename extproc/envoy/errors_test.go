package envoy_test

import (
	"context"

	"strings"
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
	keyPaid      = replay.KeyPaid
	keyNew       = replay.KeyNew
	keySuspended = replay.KeySuspended
	keyScoped    = replay.KeyScoped
	keyUnknown   = replay.KeyUnknown
	keyEnterp    = replay.KeyEnterprise
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
// (extproc/lifecycle TestChatCompletionsAdmissionErrors); the dynamic metadata has its
// own test (metadata_test.go).
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
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := h.Open(t)
			resp := x.Send(replay.RequestHeaders(tt.method == "GET", ":method", tt.method, ":path", tt.path))
			checkError(t, resp, tt.w, tt.anthropic)
			x.Close()
		})
	}
	if f.Auths != 0 {
		t.Errorf("routing errors called Authenticate %d times", f.Auths)
	}
}

func TestMessagesErrors(t *testing.T) {
	const ok = `{"model":"demo-claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name     string
		path     string
		body     string
		headers  []string
		reserveE error
		w        testkit.APIError
		reserved bool
	}{
		{name: "invalid json", body: `nope`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "max_tokens missing", body: `{"model":"demo-claude","messages":[{"role":"user","content":"hi"}]}`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error")},
		{name: "max_tokens zero", body: `{"model":"demo-claude","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error")},
		{name: "system role", body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"system","content":"hi"}]}`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "content object", body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":{"a":1}}]}`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "content null", body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":null}]}`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "block without type", body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":[{"text":"x"}]}]}`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "stream string", body: `{"model":"demo-claude","max_tokens":10,"stream":"yes","messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(400, "invalid_stream", "invalid_request_error")},
		{name: "bad model", body: `{"model":"a b","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(400, "invalid_model", "invalid_request_error")},
		{name: "no key", body: ok, w: testkit.WantError(401, "invalid_api_key", "authentication_error")},
		{name: "suspended", body: ok, headers: []string{"x-api-key", keySuspended}, w: testkit.WantError(403, "account_suspended", "permission_error")},
		{name: "embeddings model on messages", body: `{"model":"demo-embed","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(403, "model_not_available", "permission_error")},
		{name: "requires top-up", body: ok, headers: []string{"x-api-key", keyNew}, w: testkit.WantError(403, "model_requires_topup", "permission_error")},
		{name: "not allowed", body: ok, headers: []string{"x-api-key", keyScoped}, w: testkit.WantError(403, "model_not_allowed", "permission_error")},
		{name: "above model max", body: `{"model":"demo-claude","max_tokens":8193,"messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error")},
		{name: "insufficient", body: ok, headers: []string{"x-api-key", keyPaid}, reserveE: ledger.Refuse(ledger.ReasonInsufficientCredits, ""), reserved: true, w: testkit.WantError(402, "insufficient_credits", "invalid_request_error")},
		{name: "concurrency", body: ok, headers: []string{"x-api-key", keyPaid}, reserveE: &ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded}, reserved: true, w: testkit.WantError(429, "concurrency_limit_exceeded", "rate_limit_error").WithRetry("5")},
		{name: "count_tokens no messages", path: "/v1/messages/count_tokens", body: `{"model":"demo-claude","messages":[]}`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "count_tokens bad key", path: "/v1/messages/count_tokens", body: `{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", keyUnknown}, w: testkit.WantError(401, "invalid_api_key", "authentication_error")},
		{name: "count_tokens requires top-up", path: "/v1/messages/count_tokens", body: `{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", keyNew}, w: testkit.WantError(403, "model_requires_topup", "permission_error")},
		{name: "count_tokens too large", path: "/v1/messages/count_tokens", body: `{"model":"demo-claude","messages":[{"role":"user","content":"` + strings.Repeat("a", 2<<20) + `"}]}`, headers: []string{"x-api-key", keyPaid}, w: testkit.WantError(413, "request_body_too_large", "request_too_large")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.ReserveE = tt.reserveE
			h := replay.Start(t, replay.Service(t, f))
			path := tt.path
			if path == "" {
				path = "/v1/messages"
			}
			x, hdr, body := h.Post(t, path, []byte(tt.body), tt.headers...)
			resp := body
			if resp == nil {
				resp = hdr
			}
			checkError(t, resp, tt.w, true)
			x.Close()
			reserves, commits, releases := f.Counts()
			if tt.reserved != (reserves == 1) || commits != 0 || releases != 0 {
				t.Errorf("ledger saw %d reserves, %d commits, %d releases", reserves, commits, releases)
			}
		})
	}
}
