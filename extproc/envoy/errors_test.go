package envoy_test

import (
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/internal/testkit"
)

const (
	keyPaid      = "gw-paid0000000000000000000000000000000000000000"
	keyNew       = "gw-new00000000000000000000000000000000000000000"
	keySuspended = "gw-susp0000000000000000000000000000000000000000"
	keyScoped    = "gw-scope000000000000000000000000000000000000000"
	keyUnknown   = "gw-unknown0000000000000000000000000000000000000"
	keyEnterp    = "gw-enterp00000000000000000000000000000000000000"
)

func newFake() *replay.FakeLedger {
	f := &replay.FakeLedger{}
	f.AddKey(keyPaid, ledger.Grant{KeyID: "k-paid", AccountID: "a1", Tier: "default", AccountToppedUp: true})
	f.AddKey(keyNew, ledger.Grant{KeyID: "k-new", AccountID: "a2", Tier: "default"})
	f.AddKey(keySuspended, ledger.Grant{KeyID: "k-susp", AccountID: "a3", Tier: "default", AccountToppedUp: true, AccountSuspended: true})
	f.AddKey(keyScoped, ledger.Grant{KeyID: "k-scope", AccountID: "a1", Tier: "default", AccountToppedUp: true, AllowedModels: []string{"demo-free"}})
	f.AddKey(keyEnterp, ledger.Grant{KeyID: "k-ent", AccountID: "a4", Tier: "enterprise", AccountToppedUp: true})
	return f
}

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

func TestChatCompletionsErrors(t *testing.T) {
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
		{name: "invalid json", body: `{"model":`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "not an object", body: `[1,2]`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error")},
		{name: "duplicate model key", body: `{"model":"demo-free","model":"demo-premium","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("model")},
		{name: "model missing", body: `{"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_model", "invalid_request_error").WithParam("model")},
		{name: "model number", body: `{"model":5,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_model", "invalid_request_error").WithParam("model")},
		{name: "model empty", body: `{"model":"","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_model", "invalid_request_error").WithParam("model")},
		{name: "model with unicode space", body: `{"model":"demo\u00a0chat","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_model", "invalid_request_error").WithParam("model")},
		{name: "model too long", body: `{"model":"` + strings.Repeat("m", 257) + `","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_model", "invalid_request_error").WithParam("model")},
		{name: "messages missing", body: `{"model":"demo-chat"}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages")},
		{name: "messages empty", body: `{"model":"demo-chat","messages":[]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages")},
		{name: "message not object", body: `{"model":"demo-chat","messages":["hi"]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages[0]")},
		{name: "bad role", body: `{"model":"demo-chat","messages":[{"role":"robot","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages[0].role")},
		{name: "content missing", body: `{"model":"demo-chat","messages":[{"role":"user"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages[0].content")},
		{name: "content number", body: `{"model":"demo-chat","messages":[{"role":"user","content":1}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages[0].content")},
		{name: "part without type", body: `{"model":"demo-chat","messages":[{"role":"user","content":[{"text":"x"}]}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("messages[0].content[0].type")},
		{name: "max_tokens zero", body: `{"model":"demo-chat","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error").WithParam("max_tokens")},
		{name: "max_tokens fraction", body: `{"model":"demo-chat","max_tokens":1.5,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error").WithParam("max_tokens")},
		{name: "max_tokens 1.0", body: `{"model":"demo-chat","max_tokens":1.0,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error").WithParam("max_tokens")},
		{name: "max_completion_tokens string", body: `{"model":"demo-chat","max_completion_tokens":"5","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error").WithParam("max_completion_tokens")},
		{name: "max_tokens negative", body: `{"model":"demo-chat","max_tokens":-3,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error").WithParam("max_tokens")},
		{name: "stream string", body: `{"model":"demo-chat","stream":"true","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_stream", "invalid_request_error").WithParam("stream")},
		{name: "stream number", body: `{"model":"demo-chat","stream":1,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_stream", "invalid_request_error").WithParam("stream")},
		{name: "n two", body: `{"model":"demo-chat","n":2,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_n", "invalid_request_error").WithParam("n")},
		{name: "n string", body: `{"model":"demo-chat","n":"1","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_n", "invalid_request_error").WithParam("n")},
		{name: "temperature high", body: `{"model":"demo-chat","temperature":2.5,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("temperature")},
		{name: "top_p high", body: `{"model":"demo-chat","top_p":1.01,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("top_p")},
		{name: "stop number", body: `{"model":"demo-chat","stop":5,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_request", "invalid_request_error").WithParam("stop")},
		{name: "body too large by content-length", body: big, headers: bearer(keyPaid), w: testkit.WantError(413, "request_body_too_large", "invalid_request_error")},
		{name: "body too large chunked", body: big, chunked: true, headers: bearer(keyPaid), w: testkit.WantError(413, "request_body_too_large", "invalid_request_error")},
		{name: "no key", body: chatOK, w: testkit.WantError(401, "invalid_api_key", "invalid_request_error")},
		{name: "malformed key", body: chatOK, headers: bearer("sk-123"), w: testkit.WantError(401, "invalid_api_key", "invalid_request_error")},
		{name: "unknown key", body: chatOK, headers: bearer(keyUnknown), w: testkit.WantError(401, "invalid_api_key", "invalid_request_error")},
		{name: "suspended", body: chatOK, headers: bearer(keySuspended), w: testkit.WantError(403, "account_suspended", "permission_error")},
		{name: "unknown model", body: `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(403, "model_not_available", "permission_error").WithParam("model")},
		{name: "embeddings model on chat", body: `{"model":"demo-embed","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(403, "model_not_available", "permission_error").WithParam("model")},
		{name: "not in allowlist", body: chatOK, headers: bearer(keyScoped), w: testkit.WantError(403, "model_not_allowed", "permission_error").WithParam("model")},
		{name: "paid without top-up", body: chatOK, headers: []string{"x-api-key", keyNew}, w: testkit.WantError(403, "model_requires_topup", "permission_error").WithParam("model")},
		{name: "tier has no channel", body: `{"model":"demo-restricted","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(403, "model_not_available", "permission_error").WithParam("model")},
		{name: "unpriced", body: `{"model":"demo-unpriced","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(503, "pricing_unavailable", "api_error").WithParam("model")},
		{name: "max_tokens above model max", body: `{"model":"demo-chat","max_tokens":4097,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: testkit.WantError(400, "invalid_max_tokens", "invalid_request_error").WithParam("max_tokens")},
		{name: "insufficient credits", body: chatOK, headers: bearer(keyPaid), reserveE: ledger.Refuse(ledger.ReasonInsufficientCredits, ""), reserved: true, w: testkit.WantError(402, "insufficient_credits", "invalid_request_error")},
		{name: "key limit", body: chatOK, headers: bearer(keyPaid), reserveE: &ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, RetryAfter: 3600, Limit: "daily"}, reserved: true, w: testkit.WantError(429, "key_limit_reached", "rate_limit_error").WithRetry("3600")},
		{name: "concurrency", body: chatOK, headers: bearer(keyPaid), reserveE: &ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded, RetryAfter: 5, Limit: "general"}, reserved: true, w: testkit.WantError(429, "concurrency_limit_exceeded", "rate_limit_error").WithRetry("5")},
		{name: "rate limit", body: chatOK, headers: bearer(keyPaid), reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, RetryAfter: 17, Limit: "rpm"}, reserved: true, w: testkit.WantError(429, "rate_limit_exceeded", "rate_limit_error").WithRetry("17")},
		{name: "revoked between auth and reserve", body: chatOK, headers: bearer(keyPaid), reserveE: ledger.Refuse(ledger.ReasonInvalidAPIKey, ""), reserved: true, w: testkit.WantError(401, "invalid_api_key", "invalid_request_error")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.ReserveE = tt.reserveE
			h := replay.Start(t, replay.Service(t, f))
			x := h.Open(t)
			n := len(tt.body)
			if tt.chunked {
				n = -1
			}
			resp := x.Send(replay.PostHeaders(path, n, tt.headers...))
			if resp.GetImmediateResponse() == nil {
				resp = x.Send(replay.RequestBody([]byte(tt.body), true))
			}
			checkError(t, resp, tt.w, false)
			x.Close()
			reserves, commits, releases := f.Counts()
			if tt.reserved != (reserves == 1) || commits != 0 || releases != 0 {
				t.Errorf("ledger saw %d reserves, %d commits, %d releases", reserves, commits, releases)
			}
		})
	}
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
