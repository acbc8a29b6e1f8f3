package envoy_test

import (
	"encoding/json"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
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

// envelope is the union of both error bodies.
type envelope struct {
	Type  string `json:"type"`
	Error struct {
		Message   string  `json:"message"`
		Type      string  `json:"type"`
		Code      string  `json:"code"`
		Retryable *bool   `json:"retryable"`
		Param     *string `json:"param"`
		DocURL    string  `json:"doc_url"`
	} `json:"error"`
}

type want struct {
	status     int
	code       string
	typ        string // error.type in the route's envelope
	param      string
	retry      bool
	retryAfter string
}

func headerMap(ir *extprocv3.ImmediateResponse) map[string]string {
	m := map[string]string{}
	for _, h := range ir.GetHeaders().GetSetHeaders() {
		if h.GetHeader().GetValue() != "" {
			m["!value:"+h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		}
		m[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
	}
	return m
}

// checkError asserts an immediate error response in the OpenAI (anthropic=false) or
// Anthropic envelope.
func checkError(t *testing.T, resp *extprocv3.ProcessingResponse, w want, anthropic bool) {
	t.Helper()
	ir := resp.GetImmediateResponse()
	if ir == nil {
		t.Fatalf("want immediate %d %s, got %v", w.status, w.code, resp)
	}
	if got := int(ir.GetStatus().GetCode()); got != w.status {
		t.Errorf("status = %d, want %d (body %s)", got, w.status, ir.GetBody())
	}
	if ir.GetDetails() != "extproc_"+w.code {
		t.Errorf("details = %q", ir.GetDetails())
	}
	h := headerMap(ir)
	for k := range h {
		if strings.HasPrefix(k, "!value:") {
			t.Errorf("header %s set in value, not raw_value", k)
		}
	}
	if h["content-type"] != "application/json" {
		t.Errorf("content-type = %q", h["content-type"])
	}
	wantRetry := "false"
	if w.retry {
		wantRetry = "true"
	}
	if h["x-should-retry"] != wantRetry {
		t.Errorf("x-should-retry = %q, want %q", h["x-should-retry"], wantRetry)
	}
	if h["retry-after"] != w.retryAfter {
		t.Errorf("retry-after = %q, want %q", h["retry-after"], w.retryAfter)
	}
	var env envelope
	if err := json.Unmarshal(ir.GetBody(), &env); err != nil {
		t.Fatalf("body %s: %v", ir.GetBody(), err)
	}
	e := env.Error
	if e.Code != w.code || e.Type != w.typ || e.Message == "" {
		t.Errorf("error = %+v, want code %s type %s", e, w.code, w.typ)
	}
	if anthropic {
		if env.Type != "error" || e.Retryable != nil || e.DocURL != "" {
			t.Errorf("not an Anthropic envelope: %s", ir.GetBody())
		}
		return
	}
	if e.Retryable == nil || *e.Retryable != w.retry {
		t.Errorf("retryable = %v, want %v", e.Retryable, w.retry)
	}
	if e.DocURL != "https://docs.llmgw.dev/errors#"+w.code {
		t.Errorf("doc_url = %q", e.DocURL)
	}
	gotParam := ""
	if e.Param != nil {
		gotParam = *e.Param
	}
	if gotParam != w.param {
		t.Errorf("param = %q, want %q", gotParam, w.param)
	}
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
		w        want
		reserved bool // a Reserve call is expected (refused by the ledger)
	}{
		{name: "invalid json", body: `{"model":`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "", false, ""}},
		{name: "not an object", body: `[1,2]`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "", false, ""}},
		{name: "duplicate model key", body: `{"model":"demo-free","model":"demo-premium","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "model", false, ""}},
		{name: "model missing", body: `{"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_model", "invalid_request_error", "model", false, ""}},
		{name: "model number", body: `{"model":5,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_model", "invalid_request_error", "model", false, ""}},
		{name: "model empty", body: `{"model":"","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_model", "invalid_request_error", "model", false, ""}},
		{name: "model with unicode space", body: `{"model":"demo\u00a0chat","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_model", "invalid_request_error", "model", false, ""}},
		{name: "model too long", body: `{"model":"` + strings.Repeat("m", 257) + `","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_model", "invalid_request_error", "model", false, ""}},
		{name: "messages missing", body: `{"model":"demo-chat"}`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "messages", false, ""}},
		{name: "messages empty", body: `{"model":"demo-chat","messages":[]}`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "messages", false, ""}},
		{name: "message not object", body: `{"model":"demo-chat","messages":["hi"]}`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "messages[0]", false, ""}},
		{name: "bad role", body: `{"model":"demo-chat","messages":[{"role":"robot","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "messages[0].role", false, ""}},
		{name: "content missing", body: `{"model":"demo-chat","messages":[{"role":"user"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "messages[0].content", false, ""}},
		{name: "content number", body: `{"model":"demo-chat","messages":[{"role":"user","content":1}]}`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "messages[0].content", false, ""}},
		{name: "part without type", body: `{"model":"demo-chat","messages":[{"role":"user","content":[{"text":"x"}]}]}`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "messages[0].content[0].type", false, ""}},
		{name: "max_tokens zero", body: `{"model":"demo-chat","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_max_tokens", "invalid_request_error", "max_tokens", false, ""}},
		{name: "max_tokens fraction", body: `{"model":"demo-chat","max_tokens":1.5,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_max_tokens", "invalid_request_error", "max_tokens", false, ""}},
		{name: "max_tokens 1.0", body: `{"model":"demo-chat","max_tokens":1.0,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_max_tokens", "invalid_request_error", "max_tokens", false, ""}},
		{name: "max_completion_tokens string", body: `{"model":"demo-chat","max_completion_tokens":"5","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_max_tokens", "invalid_request_error", "max_completion_tokens", false, ""}},
		{name: "max_tokens negative", body: `{"model":"demo-chat","max_tokens":-3,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_max_tokens", "invalid_request_error", "max_tokens", false, ""}},
		{name: "stream string", body: `{"model":"demo-chat","stream":"true","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_stream", "invalid_request_error", "stream", false, ""}},
		{name: "stream number", body: `{"model":"demo-chat","stream":1,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_stream", "invalid_request_error", "stream", false, ""}},
		{name: "n two", body: `{"model":"demo-chat","n":2,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_n", "invalid_request_error", "n", false, ""}},
		{name: "n string", body: `{"model":"demo-chat","n":"1","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_n", "invalid_request_error", "n", false, ""}},
		{name: "temperature high", body: `{"model":"demo-chat","temperature":2.5,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "temperature", false, ""}},
		{name: "top_p high", body: `{"model":"demo-chat","top_p":1.01,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "top_p", false, ""}},
		{name: "stop number", body: `{"model":"demo-chat","stop":5,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_request", "invalid_request_error", "stop", false, ""}},
		{name: "body too large by content-length", body: big, headers: bearer(keyPaid), w: want{413, "request_body_too_large", "invalid_request_error", "", false, ""}},
		{name: "body too large chunked", body: big, chunked: true, headers: bearer(keyPaid), w: want{413, "request_body_too_large", "invalid_request_error", "", false, ""}},
		{name: "no key", body: chatOK, w: want{401, "invalid_api_key", "invalid_request_error", "", false, ""}},
		{name: "malformed key", body: chatOK, headers: bearer("sk-123"), w: want{401, "invalid_api_key", "invalid_request_error", "", false, ""}},
		{name: "unknown key", body: chatOK, headers: bearer(keyUnknown), w: want{401, "invalid_api_key", "invalid_request_error", "", false, ""}},
		{name: "suspended", body: chatOK, headers: bearer(keySuspended), w: want{403, "account_suspended", "permission_error", "", false, ""}},
		{name: "unknown model", body: `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{403, "model_not_available", "permission_error", "model", false, ""}},
		{name: "embeddings model on chat", body: `{"model":"demo-embed","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{403, "model_not_available", "permission_error", "model", false, ""}},
		{name: "not in allowlist", body: chatOK, headers: bearer(keyScoped), w: want{403, "model_not_allowed", "permission_error", "model", false, ""}},
		{name: "paid without top-up", body: chatOK, headers: []string{"x-api-key", keyNew}, w: want{403, "model_requires_topup", "permission_error", "model", false, ""}},
		{name: "tier has no channel", body: `{"model":"demo-restricted","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{403, "model_not_available", "permission_error", "model", false, ""}},
		{name: "unpriced", body: `{"model":"demo-unpriced","messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{503, "pricing_unavailable", "api_error", "model", false, ""}},
		{name: "max_tokens above model max", body: `{"model":"demo-chat","max_tokens":4097,"messages":[{"role":"user","content":"x"}]}`, headers: bearer(keyPaid), w: want{400, "invalid_max_tokens", "invalid_request_error", "max_tokens", false, ""}},
		{name: "insufficient credits", body: chatOK, headers: bearer(keyPaid), reserveE: ledger.Refuse(ledger.ReasonInsufficientCredits, ""), reserved: true, w: want{402, "insufficient_credits", "invalid_request_error", "", false, ""}},
		{name: "key limit", body: chatOK, headers: bearer(keyPaid), reserveE: &ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, RetryAfter: 3600, Limit: "daily"}, reserved: true, w: want{429, "key_limit_reached", "rate_limit_error", "", true, "3600"}},
		{name: "concurrency", body: chatOK, headers: bearer(keyPaid), reserveE: &ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded, RetryAfter: 5, Limit: "general"}, reserved: true, w: want{429, "concurrency_limit_exceeded", "rate_limit_error", "", true, "5"}},
		{name: "rate limit", body: chatOK, headers: bearer(keyPaid), reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, RetryAfter: 17, Limit: "rpm"}, reserved: true, w: want{429, "rate_limit_exceeded", "rate_limit_error", "", true, "17"}},
		{name: "revoked between auth and reserve", body: chatOK, headers: bearer(keyPaid), reserveE: ledger.Refuse(ledger.ReasonInvalidAPIKey, ""), reserved: true, w: want{401, "invalid_api_key", "invalid_request_error", "", false, ""}},
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
		w                  want
		anthropic          bool
	}{
		{name: "unknown path", method: "POST", path: "/v1/nope", w: want{404, "not_found", "invalid_request_error", "", false, ""}},
		{name: "no version prefix", method: "POST", path: "/chat/completions", w: want{404, "not_found", "invalid_request_error", "", false, ""}},
		{name: "chat with GET", method: "GET", path: "/v1/chat/completions", w: want{405, "method_not_allowed", "invalid_request_error", "", false, ""}},
		{name: "models with POST", method: "POST", path: "/v1/models?x=1", w: want{405, "method_not_allowed", "invalid_request_error", "", false, ""}},
		{name: "messages with GET", method: "GET", path: "/v1/messages", anthropic: true, w: want{405, "method_not_allowed", "invalid_request_error", "", false, ""}},
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
		w        want
		reserved bool
	}{
		{name: "invalid json", body: `nope`, headers: []string{"x-api-key", keyPaid}, w: want{400, "invalid_request", "invalid_request_error", "", false, ""}},
		{name: "max_tokens missing", body: `{"model":"demo-claude","messages":[{"role":"user","content":"hi"}]}`, headers: []string{"x-api-key", keyPaid}, w: want{400, "invalid_max_tokens", "invalid_request_error", "", false, ""}},
		{name: "max_tokens zero", body: `{"model":"demo-claude","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, headers: []string{"x-api-key", keyPaid}, w: want{400, "invalid_max_tokens", "invalid_request_error", "", false, ""}},
		{name: "system role", body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"system","content":"hi"}]}`, headers: []string{"x-api-key", keyPaid}, w: want{400, "invalid_request", "invalid_request_error", "", false, ""}},
		{name: "content object", body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":{"a":1}}]}`, headers: []string{"x-api-key", keyPaid}, w: want{400, "invalid_request", "invalid_request_error", "", false, ""}},
		{name: "content null", body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":null}]}`, headers: []string{"x-api-key", keyPaid}, w: want{400, "invalid_request", "invalid_request_error", "", false, ""}},
		{name: "block without type", body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":[{"text":"x"}]}]}`, headers: []string{"x-api-key", keyPaid}, w: want{400, "invalid_request", "invalid_request_error", "", false, ""}},
		{name: "stream string", body: `{"model":"demo-claude","max_tokens":10,"stream":"yes","messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", keyPaid}, w: want{400, "invalid_stream", "invalid_request_error", "", false, ""}},
		{name: "bad model", body: `{"model":"a b","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", keyPaid}, w: want{400, "invalid_model", "invalid_request_error", "", false, ""}},
		{name: "no key", body: ok, w: want{401, "invalid_api_key", "authentication_error", "", false, ""}},
		{name: "suspended", body: ok, headers: []string{"x-api-key", keySuspended}, w: want{403, "account_suspended", "permission_error", "", false, ""}},
		{name: "embeddings model on messages", body: `{"model":"demo-embed","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", keyPaid}, w: want{403, "model_not_available", "permission_error", "", false, ""}},
		{name: "requires top-up", body: ok, headers: []string{"x-api-key", keyNew}, w: want{403, "model_requires_topup", "permission_error", "", false, ""}},
		{name: "not allowed", body: ok, headers: []string{"x-api-key", keyScoped}, w: want{403, "model_not_allowed", "permission_error", "", false, ""}},
		{name: "above model max", body: `{"model":"demo-claude","max_tokens":8193,"messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", keyPaid}, w: want{400, "invalid_max_tokens", "invalid_request_error", "", false, ""}},
		{name: "insufficient", body: ok, headers: []string{"x-api-key", keyPaid}, reserveE: ledger.Refuse(ledger.ReasonInsufficientCredits, ""), reserved: true, w: want{402, "insufficient_credits", "invalid_request_error", "", false, ""}},
		{name: "concurrency", body: ok, headers: []string{"x-api-key", keyPaid}, reserveE: &ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded}, reserved: true, w: want{429, "concurrency_limit_exceeded", "rate_limit_error", "", true, "5"}},
		{name: "count_tokens no messages", path: "/v1/messages/count_tokens", body: `{"model":"demo-claude","messages":[]}`, headers: []string{"x-api-key", keyPaid}, w: want{400, "invalid_request", "invalid_request_error", "", false, ""}},
		{name: "count_tokens bad key", path: "/v1/messages/count_tokens", body: `{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", keyUnknown}, w: want{401, "invalid_api_key", "authentication_error", "", false, ""}},
		{name: "count_tokens requires top-up", path: "/v1/messages/count_tokens", body: `{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`, headers: []string{"x-api-key", keyNew}, w: want{403, "model_requires_topup", "permission_error", "", false, ""}},
		{name: "count_tokens too large", path: "/v1/messages/count_tokens", body: `{"model":"demo-claude","messages":[{"role":"user","content":"` + strings.Repeat("a", 2<<20) + `"}]}`, headers: []string{"x-api-key", keyPaid}, w: want{413, "request_body_too_large", "request_too_large", "", false, ""}},
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
