package lifecycle_test

import (
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/internal/testkit"
)

// TestChatCompletionsAdmissionErrors: every refusal of admission on the chat endpoint
// (body, key, model, ledger) is the spec's error, and nothing is held or settled except
// the one reservation the ledger itself refused.
func TestChatCompletionsAdmissionErrors(t *testing.T) {
	const path = "/v1/chat/completions"
	big := `{"model":"demo-chat","messages":[{"role":"user","content":"` + strings.Repeat("a", 2<<20) + `"}]}`
	tests := []refusal{
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
	checkRefusals(t, path, false, tests)
}

// TestMessagesErrors: every refusal of admission on the Messages and count_tokens
// endpoints is the spec's error in the Anthropic envelope, and nothing is held or
// settled except the one reservation the ledger itself refused.
func TestMessagesErrors(t *testing.T) {
	const ok = `{"model":"demo-claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	tests := []refusal{
		{name: "invalid json", body: `nope`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "max_tokens missing", body: `{"model":"demo-claude","messages":[{"role":"user","content":"hi"}]}`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error")},
		{name: "max_tokens zero", body: `{"model":"demo-claude","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error")},
		{name: "system role", body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"system","content":"hi"}]}`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "content object", body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":{"a":1}}]}`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "content null", body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":null}]}`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "block without type", body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":[{"text":"x"}]}]}`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "stream string", body: `{"model":"demo-claude","max_tokens":10,"stream":"yes","messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(400, "invalid_stream", "invalid_request_error")},
		{name: "bad model", body: `{"model":"a b","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(400, "invalid_model", "invalid_request_error")},
		{name: "no key", body: ok, w: testkit.WantError(401, "invalid_api_key", "authentication_error")},
		{name: "suspended", body: ok, headers: []string{"x-api-key", replay.KeySuspended}, w: testkit.WantError(403, "account_suspended", "permission_error")},
		{name: "embeddings model on messages", body: `{"model":"demo-embed","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(403, "model_not_available", "permission_error")},
		{name: "requires top-up", body: ok, headers: []string{"x-api-key", replay.KeyNew}, w: testkit.WantError(403, "model_requires_topup", "permission_error")},
		{name: "not allowed", body: ok, headers: []string{"x-api-key", replay.KeyScoped}, w: testkit.WantError(403, "model_not_allowed", "permission_error")},
		{name: "above model max", body: `{"model":"demo-claude","max_tokens":8193,"messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error")},
		{name: "insufficient", body: ok, headers: []string{"x-api-key", replay.KeyPaid}, reserveE: ledger.Refuse(ledger.ReasonInsufficientCredits, ""), reserved: true, w: testkit.WantError(402, "insufficient_credits", "invalid_request_error")},
		{name: "concurrency", body: ok, headers: []string{"x-api-key", replay.KeyPaid}, reserveE: &ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded}, reserved: true, w: testkit.WantError(429, "concurrency_limit_exceeded", "rate_limit_error").WithRetry("5")},
		{name: "count_tokens no messages", path: "/v1/messages/count_tokens", body: `{"model":"demo-claude","messages":[]}`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "count_tokens bad key", path: "/v1/messages/count_tokens", body: `{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", replay.KeyUnknown}, w: testkit.WantError(401, "invalid_api_key", "authentication_error")},
		{name: "count_tokens requires top-up", path: "/v1/messages/count_tokens", body: `{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", replay.KeyNew}, w: testkit.WantError(403, "model_requires_topup", "permission_error")},
		{name: "count_tokens too large", path: "/v1/messages/count_tokens", body: `{"model":"demo-claude","messages":[{"role":"user","content":"` + strings.Repeat("a", 2<<20) + `"}]}`, headers: []string{"x-api-key", replay.KeyPaid}, w: testkit.WantError(413, "request_body_too_large", "request_too_large")},
	}
	checkRefusals(t, "/v1/messages", true, tests)
}
