package e2e_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/testkit"
)

// TestUnknownFieldRefusalNamesIt: a misspelt top-level field goes to the provider, which
// refuses it as the real ones do (the mocks' strictness); the client gets 400
// invalid_request naming the field in the gateway's words (param on the OpenAI routes),
// never the provider's message or its model id, and nothing is charged.
func TestUnknownFieldRefusalNamesIt(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	for _, tc := range []struct {
		name, path, body string
		headers          []string
		param            bool
	}{
		{"chat", "/chat/completions", `{"model":"demo-chat","foo":1,"messages":[{"role":"user","content":"hi"}]}`, nil, true},
		{"responses", "/responses", `{"model":"demo-responses","foo":1,"input":"hi"}`, nil, true},
		{"messages", "/messages", `{"model":"demo-claude","max_tokens":16,"foo":1,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"x-api-key", c.key, "anthropic-version", "2023-06-01"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := c.key
			if tc.headers != nil {
				key = ""
			}
			status, _, body := rawRequest(t, http.MethodPost, tc.path, key, []byte(tc.body), tc.headers...)
			var env testkit.ErrorEnvelope
			if err := json.Unmarshal(body, &env); err != nil || status != 400 || env.Error.Code != "invalid_request" {
				t.Fatalf("%d %s, want 400 invalid_request", status, body)
			}
			if !strings.Contains(env.Error.Message, `"foo"`) || strings.Contains(string(body), "mock-") ||
				strings.Contains(string(body), "Unrecognized") || strings.Contains(string(body), "Extra inputs") {
				t.Errorf("message %q: want the field named in the gateway's words, nothing of the provider's", env.Error.Message)
			}
			if tc.param && (env.Error.Param == nil || *env.Error.Param != "foo") {
				t.Errorf("param %v, want foo", env.Error.Param)
			}
		})
	}
	c.waitSettled(t)
	if got := c.balance(t); got != 10_000_000 {
		t.Errorf("refused requests charged %d micros", 10_000_000-got)
	}
}

// TestInsufficientCreditsSaysHoldAndAvailable: an account with 0.001 credits cannot say
// "hi" to demo-chat with its maximum output held; the 402 says the hold and the 0.001
// available, and how to lower the hold, which then lets the request through.
func TestInsufficientCreditsSaysHoldAndAvailable(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "0.001"})
	status, h, body := rawRequest(t, http.MethodPost, "/chat/completions", c.key, chatBody("demo-chat", ""))
	checkOpenAIError(t, status, h, body, 402, "insufficient_credits", "invalid_request_error", false)
	var env testkit.ErrorEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"This request holds 0.00", "the account has 0.001 credits available", "'max_tokens'"} {
		if !strings.Contains(env.Error.Message, w) {
			t.Errorf("message %q lacks %q", env.Error.Message, w)
		}
	}
	if status, _, body := rawRequest(t, http.MethodPost, "/chat/completions", c.key, chatBody("demo-chat", `"max_tokens":16`)); status != 200 {
		t.Errorf("with a lower max_tokens: %d %s", status, body)
	}
}
