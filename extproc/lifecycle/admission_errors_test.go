package lifecycle_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/internal/testkit"
)

func bearer(k string) []string { return []string{"authorization", "Bearer " + k} }

const chatOK = `{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`

// postHeaders are the request headers of a JSON POST to path as Envoy hands them over,
// with content-length n (n < 0: chunked, none) and the extra name/value pairs.
func postHeaders(path string, n int, extra ...string) []lifecycle.Header {
	hs := []lifecycle.Header{{":method", "POST"}, {":path", path}, {":authority", "gateway"}, {":scheme", "http"},
		{"content-type", "application/json"}, {"x-forwarded-proto", "http"}}
	if n >= 0 {
		hs = append(hs, lifecycle.Header{Name: "content-length", Value: strconv.Itoa(n)})
	}
	for i := 0; i+1 < len(extra); i += 2 {
		hs = append(hs, lifecycle.Header{Name: extra[i], Value: extra[i+1]})
	}
	return hs
}

// checkRefused asserts the lifecycle's immediate answer is w, in the OpenAI envelope or
// the Anthropic one, with details naming the code for Envoy's local_reply_config.
func checkRefused(t *testing.T, im *lifecycle.Immediate, w testkit.APIError, anthropic bool) {
	t.Helper()
	if im == nil {
		t.Fatalf("admitted, want %d %s", w.Status, w.Code)
	}
	if im.Details != "extproc_"+w.Code {
		t.Errorf("details = %q", im.Details)
	}
	h := map[string]string{}
	for _, kv := range im.Headers {
		h[kv.Name] = kv.Value
	}
	w.Check(t, im.Status, h, im.Body, anthropic)
}

// TestChatCompletionsAdmissionErrors: every refusal of admission on the chat endpoint
// (body, key, model, ledger) is the spec's error, and nothing is held or settled except
// the one reservation the ledger itself refused.
func TestChatCompletionsAdmissionErrors(t *testing.T) {
	const path = "/v1/chat/completions"
	big := `{"model":"demo-chat","messages":[{"role":"user","content":"` + strings.Repeat("a", 2<<20) + `"}]}`
	tests := []struct {
		name     string
		body     string
		headers  []string
		chunked  bool
		reserveE error
		w        testkit.APIError
		reserved bool // a Reserve call is expected (refused by the ledger)
	}{
		{name: "invalid json", body: `{"model":`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "not an object", body: `[1,2]`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "duplicate model key", body: `{"model":"demo-free","model":"demo-premium","messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("model")},
		{name: "model missing", body: `{"messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_model", "invalid_request_error").WithParam("model")},
		{name: "model number", body: `{"model":5,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_model", "invalid_request_error").WithParam("model")},
		{name: "model empty", body: `{"model":"","messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_model", "invalid_request_error").WithParam("model")},
		{name: "model with unicode space", body: `{"model":"demo\u00a0chat","messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_model", "invalid_request_error").WithParam("model")},
		{name: "model too long", body: `{"model":"` + strings.Repeat("m", 257) + `","messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_model", "invalid_request_error").WithParam("model")},
		{name: "messages missing", body: `{"model":"demo-chat"}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages")},
		{name: "messages empty", body: `{"model":"demo-chat","messages":[]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages")},
		{name: "message not object", body: `{"model":"demo-chat","messages":["hi"]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages[0]")},
		{name: "bad role", body: `{"model":"demo-chat","messages":[{"role":"robot","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages[0].role")},
		{name: "content missing", body: `{"model":"demo-chat","messages":[{"role":"user"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages[0].content")},
		{name: "content number", body: `{"model":"demo-chat","messages":[{"role":"user","content":1}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages[0].content")},
		{name: "part without type", body: `{"model":"demo-chat","messages":[{"role":"user","content":[{"text":"x"}]}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages[0].content[0].type")},
		{name: "max_tokens zero", body: `{"model":"demo-chat","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error").WithParam("max_tokens")},
		{name: "max_tokens fraction", body: `{"model":"demo-chat","max_tokens":1.5,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error").WithParam("max_tokens")},
		{name: "max_tokens 1.0", body: `{"model":"demo-chat","max_tokens":1.0,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error").WithParam("max_tokens")},
		{name: "max_completion_tokens string", body: `{"model":"demo-chat","max_completion_tokens":"5","messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error").WithParam("max_completion_tokens")},
		{name: "max_tokens negative", body: `{"model":"demo-chat","max_tokens":-3,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error").WithParam("max_tokens")},
		{name: "stream string", body: `{"model":"demo-chat","stream":"true","messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_stream", "invalid_request_error").WithParam("stream")},
		{name: "stream number", body: `{"model":"demo-chat","stream":1,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_stream", "invalid_request_error").WithParam("stream")},
		{name: "n two", body: `{"model":"demo-chat","n":2,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_n", "invalid_request_error").WithParam("n")},
		{name: "n string", body: `{"model":"demo-chat","n":"1","messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_n", "invalid_request_error").WithParam("n")},
		{name: "temperature high", body: `{"model":"demo-chat","temperature":2.5,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("temperature")},
		{name: "top_p high", body: `{"model":"demo-chat","top_p":1.01,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("top_p")},
		{name: "stop number", body: `{"model":"demo-chat","stop":5,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("stop")},
		{name: "body too large by content-length", body: big, headers: bearer(replay.KeyPaid), w: testkit.WantError(413, "request_body_too_large", "invalid_request_error")},
		{name: "body too large chunked", body: big, chunked: true, headers: bearer(replay.KeyPaid), w: testkit.WantError(413, "request_body_too_large", "invalid_request_error")},
		{name: "no key", body: chatOK, w: testkit.WantError(401, "invalid_api_key", "invalid_request_error")},
		{name: "malformed key", body: chatOK, headers: bearer("sk-123"), w: testkit.WantError(401, "invalid_api_key", "invalid_request_error")},
		{name: "unknown key", body: chatOK, headers: bearer(replay.KeyUnknown), w: testkit.WantError(401, "invalid_api_key", "invalid_request_error")},
		{name: "suspended", body: chatOK, headers: bearer(replay.KeySuspended), w: testkit.WantError(403, "account_suspended", "permission_error")},
		{name: "unknown model", body: `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(403, "model_not_available", "permission_error").WithParam("model")},
		{name: "embeddings model on chat", body: `{"model":"demo-embed","messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(403, "model_not_available", "permission_error").WithParam("model")},
		{name: "not in allowlist", body: chatOK, headers: bearer(replay.KeyScoped), w: testkit.WantError(403, "model_not_allowed", "permission_error").WithParam("model")},
		{name: "paid without top-up", body: chatOK, headers: []string{"x-api-key", replay.KeyNew}, w: testkit.WantError(403, "model_requires_topup", "permission_error").WithParam("model")},
		{name: "tier has no channel", body: `{"model":"demo-restricted","messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(403, "model_not_available", "permission_error").WithParam("model")},
		{name: "unpriced", body: `{"model":"demo-unpriced","messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(503, "pricing_unavailable", "api_error").WithParam("model")},
		{name: "max_tokens above model max", body: `{"model":"demo-chat","max_tokens":4097,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(replay.KeyPaid), w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error").WithParam("max_tokens")},
		{name: "insufficient credits", body: chatOK, headers: bearer(replay.KeyPaid), reserveE: ledger.Refuse(ledger.ReasonInsufficientCredits, ""), reserved: true, w: testkit.WantError(402, "insufficient_credits", "invalid_request_error")},
		{name: "key limit", body: chatOK, headers: bearer(replay.KeyPaid), reserveE: &ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, RetryAfter: 3600, Limit: "daily"}, reserved: true, w: testkit.WantError(429, "key_limit_reached", "rate_limit_error").WithRetry("3600")},
		{name: "concurrency", body: chatOK, headers: bearer(replay.KeyPaid), reserveE: &ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded, RetryAfter: 5, Limit: "general"}, reserved: true, w: testkit.WantError(429, "concurrency_limit_exceeded", "rate_limit_error").WithRetry("5")},
		{name: "rate limit", body: chatOK, headers: bearer(replay.KeyPaid), reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, RetryAfter: 17, Limit: "rpm"}, reserved: true, w: testkit.WantError(429, "rate_limit_exceeded", "rate_limit_error").WithRetry("17")},
		{name: "revoked between auth and reserve", body: chatOK, headers: bearer(replay.KeyPaid), reserveE: ledger.Refuse(ledger.ReasonInvalidAPIKey, ""), reserved: true, w: testkit.WantError(401, "invalid_api_key", "invalid_request_error")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := replay.DemoLedger()
			f.ReserveE = tt.reserveE
			r := replay.Service(t, f).NewRequest()
			ctx := context.Background()
			n := len(tt.body)
			if tt.chunked {
				n = -1
			}
			a := r.RequestHeaders(ctx, postHeaders(path, n, tt.headers...), false)
			if a.Immediate == nil {
				a = r.RequestBody(ctx, []byte(tt.body), true)
			}
			checkRefused(t, a.Immediate, tt.w, false)
			r.End(ctx, "done")
			reserves, commits, releases := f.Counts()
			if tt.reserved != (reserves == 1) || commits != 0 || releases != 0 {
				t.Errorf("ledger saw %d reserves, %d commits, %d releases", reserves, commits, releases)
			}
		})
	}
}
