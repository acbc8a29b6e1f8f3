package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/llmgw/gateway/internal/testkit"
	"github.com/openai/openai-go/v3"
)

// rawRequest sends a request to the gateway with an optional key and returns status,
// headers and body.
func rawRequest(t *testing.T, method, path, key string, body []byte, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, gw.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("content-type", "application/json")
	}
	if key != "" {
		req.Header.Set("authorization", "Bearer "+key)
	}
	return send(t, req, headers...)
}

// send sets the header pairs on req, sends it and returns status, headers and body.
func send(t *testing.T, req *http.Request, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// checkOpenAIError asserts the OpenAI envelope with the spec's status, code, type and
// retry headers.
func checkOpenAIError(t *testing.T, status int, h http.Header, body []byte, wantStatus int, wantCode, wantType string, retryable bool) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("status = %d, want %d (%s)", status, wantStatus, body)
	}
	var env testkit.ErrorEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("body %q is not the OpenAI envelope: %v", body, err)
	}
	e := env.Error
	if e.Code != wantCode || e.Type != wantType || e.Message == "" || e.DocURL == "" || e.Retryable == nil || *e.Retryable != retryable {
		t.Errorf("envelope = %s, want code %s type %s retryable %v", body, wantCode, wantType, retryable)
	}
	if got := h.Get("x-should-retry"); got != strconv.FormatBool(retryable) {
		t.Errorf("x-should-retry = %q, want %v", got, retryable)
	}
	if ct := h.Get("content-type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("content-type = %q", ct)
	}
}

func chatBody(model string, extra string) []byte {
	b := `{"model":` + strconv.Quote(model) + `,"messages":[{"role":"user","content":"hi"}]`
	if extra != "" {
		b += "," + extra
	}
	return []byte(b + "}")
}

func TestChatErrors(t *testing.T) {
	t.Parallel()
	paid := newCustomer(t, customerOpts{topup: "10"})
	free := newCustomer(t, customerOpts{})
	scoped := newCustomer(t, customerOpts{topup: "10", keyArgs: []string{"--models", "demo-free"}})
	poor := newCustomer(t, customerOpts{topup: "0.000001"})
	limited := newCustomer(t, customerOpts{topup: "10", keyArgs: []string{"--daily-limit", "0.000001"}})
	suspended := newCustomer(t, customerOpts{topup: "10"})
	ctl(t, "account", "suspend", suspended.account)
	revoked := newCustomer(t, customerOpts{topup: "10"})
	ctl(t, "key", "revoke", revoked.keyID)
	disabled := newCustomer(t, customerOpts{topup: "10"})
	ctl(t, "key", "disable", disabled.keyID)
	expired := newCustomer(t, customerOpts{topup: "10", keyArgs: []string{"--expires", "2001-01-01T00:00:00Z"}})

	big := append(append([]byte(`{"model":"demo-chat","messages":[{"role":"user","content":"`), bytes.Repeat([]byte("a"), 2<<20)...), `"}]}`...)

	for _, tc := range []struct {
		name      string
		key       string
		path      string
		body      []byte
		status    int
		code      string
		typ       string
		retryable bool
	}{
		{"no key", "", "/chat/completions", chatBody("demo-chat", ""), 401, "invalid_api_key", "invalid_request_error", false},
		{"unknown key", "gw-unknown", "/chat/completions", chatBody("demo-chat", ""), 401, "invalid_api_key", "invalid_request_error", false},
		{"revoked key", revoked.key, "/chat/completions", chatBody("demo-chat", ""), 401, "invalid_api_key", "invalid_request_error", false},
		{"disabled key", disabled.key, "/chat/completions", chatBody("demo-chat", ""), 401, "invalid_api_key", "invalid_request_error", false},
		{"expired key", expired.key, "/chat/completions", chatBody("demo-chat", ""), 401, "invalid_api_key", "invalid_request_error", false},
		{"suspended", suspended.key, "/chat/completions", chatBody("demo-chat", ""), 403, "account_suspended", "permission_error", false},
		{"not allowed", scoped.key, "/chat/completions", chatBody("demo-chat", ""), 403, "model_not_allowed", "permission_error", false},
		{"requires topup", free.key, "/chat/completions", chatBody("demo-chat", ""), 403, "model_requires_topup", "permission_error", false},
		{"not available for tier", paid.key, "/chat/completions", chatBody("demo-restricted", ""), 403, "model_not_available", "permission_error", false},
		{"unpriced", paid.key, "/chat/completions", chatBody("demo-unpriced", ""), 503, "pricing_unavailable", "api_error", false},
		{"insufficient credits", poor.key, "/chat/completions", chatBody("demo-chat", ""), 402, "insufficient_credits", "invalid_request_error", false},
		{"key limit", limited.key, "/chat/completions", chatBody("demo-chat", ""), 429, "key_limit_reached", "rate_limit_error", true},
		{"malformed json", paid.key, "/chat/completions", []byte(`{"model":`), 400, "invalid_request", "invalid_request_error", false},
		{"no messages", paid.key, "/chat/completions", []byte(`{"model":"demo-chat","messages":[]}`), 400, "invalid_request", "invalid_request_error", false},
		{"bad role", paid.key, "/chat/completions", []byte(`{"model":"demo-chat","messages":[{"role":"robot","content":"x"}]}`), 400, "invalid_request", "invalid_request_error", false},
		{"model with space", paid.key, "/chat/completions", chatBody("demo chat", ""), 400, "invalid_model", "invalid_request_error", false},
		{"model not a string", paid.key, "/chat/completions", []byte(`{"model":5,"messages":[{"role":"user","content":"x"}]}`), 400, "invalid_model", "invalid_request_error", false},
		{"max_tokens zero", paid.key, "/chat/completions", chatBody("demo-chat", `"max_tokens":0`), 400, "invalid_max_tokens", "invalid_request_error", false},
		{"max_completion_tokens fraction", paid.key, "/chat/completions", chatBody("demo-chat", `"max_completion_tokens":1.5`), 400, "invalid_max_tokens", "invalid_request_error", false},
		{"stream string", paid.key, "/chat/completions", chatBody("demo-chat", `"stream":"true"`), 400, "invalid_stream", "invalid_request_error", false},
		{"n two", paid.key, "/chat/completions", chatBody("demo-chat", `"n":2`), 400, "invalid_n", "invalid_request_error", false},
		{"temperature", paid.key, "/chat/completions", chatBody("demo-chat", `"temperature":2.5`), 400, "invalid_request", "invalid_request_error", false},
		{"top_p", paid.key, "/chat/completions", chatBody("demo-chat", `"top_p":-0.1`), 400, "invalid_request", "invalid_request_error", false},
		{"too large", paid.key, "/chat/completions", big, 413, "request_body_too_large", "invalid_request_error", false},
		{"unknown path", paid.key, "/chat/completion", chatBody("demo-chat", ""), 404, "not_found", "invalid_request_error", false},
		{"exhausted upstream", paid.key, "/chat/completions", chatBody("demo-exhausted", ""), 503, "upstream_account_unavailable", "api_error", true},
		{"broken upstream", paid.key, "/chat/completions", chatBody("demo-broken", ""), 502, "upstream_error", "api_error", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := rawRequest(t, http.MethodPost, tc.path, tc.key, tc.body)
			checkOpenAIError(t, status, h, body, tc.status, tc.code, tc.typ, tc.retryable)
			if tc.code == "key_limit_reached" && h.Get("retry-after") == "" {
				t.Error("key_limit_reached without Retry-After")
			}
		})
	}
	for _, c := range []customer{paid, poor, limited} {
		acc := c.waitSettled(t)
		if micros(t, acc, "balance") != micros(t, acc, "available") {
			t.Errorf("refused requests left a hold: %v", acc)
		}
	}
	if got := paid.balance(t); got != 10_000_000 {
		t.Errorf("refused and failed requests charged %d micros", 10_000_000-got)
	}
}

func TestChatErrorsThroughSDK(t *testing.T) {
	t.Parallel()
	free := newCustomer(t, customerOpts{})
	client := openaiClient(free.key)
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "demo-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 || apiErr.Code != "model_requires_topup" || apiErr.Type != "permission_error" {
		t.Fatalf("err = %v", err)
	}
	// The free model works without a top-up.
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "demo-free",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil || resp.Model != "demo-free" {
		t.Fatalf("free model: %v %+v", err, resp)
	}
}

func TestMessagesErrors(t *testing.T) {
	t.Parallel()
	free := newCustomer(t, customerOpts{})
	paid := newCustomer(t, customerOpts{topup: "10"})
	for _, tc := range []struct {
		name   string
		key    string
		path   string
		body   string
		status int
		typ    string
		code   string
	}{
		{"no key", "", "/messages", `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`, 401, "authentication_error", "invalid_api_key"},
		{"requires topup", free.key, "/messages", `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`, 403, "permission_error", "model_requires_topup"},
		{"max_tokens missing", paid.key, "/messages", `{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error", "invalid_max_tokens"},
		{"system role", paid.key, "/messages", `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"system","content":"x"}]}`, 400, "invalid_request_error", "invalid_request"},
		{"stream not bool", paid.key, "/messages", `{"model":"demo-claude","max_tokens":10,"stream":1,"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error", "invalid_stream"},
		{"count_tokens no messages", paid.key, "/messages/count_tokens", `{"model":"demo-claude","messages":[]}`, 400, "invalid_request_error", "invalid_request"},
		{"count_tokens requires topup", free.key, "/messages/count_tokens", `{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`, 403, "permission_error", "model_requires_topup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := rawRequest(t, http.MethodPost, tc.path, "", []byte(tc.body), "x-api-key", tc.key, "anthropic-version", "2023-06-01")
			if status != tc.status {
				t.Errorf("status = %d, want %d (%s)", status, tc.status, body)
			}
			var env testkit.ErrorEnvelope
			if err := json.Unmarshal(body, &env); err != nil || env.Type != "error" || env.Error.Type != tc.typ || env.Error.Code != tc.code || env.Error.Message == "" {
				t.Errorf("envelope = %s, want type %s code %s", body, tc.typ, tc.code)
			}
			if h.Get("x-should-retry") != "false" {
				t.Errorf("x-should-retry = %q", h.Get("x-should-retry"))
			}
		})
	}

	client := anthropicClient(free.key)
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "demo-claude", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))},
	})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 {
		t.Fatalf("err = %v", err)
	}
}

// TestConcurrencyLimit holds the tight tier's two general slots with slow streams and
// checks that a third request is refused with Retry-After 5, and admitted again after.
func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{tier: "tight", topup: "10"})
	started := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, gw.BaseURL+"/chat/completions",
				strings.NewReader(`{"model":"demo-free","stream":true,"messages":[{"role":"user","content":"[[mock:slow=3]]"}]}`))
			req.Header.Set("authorization", "Bearer "+c.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				started <- struct{}{}
				return
			}
			defer resp.Body.Close()
			buf := make([]byte, 1)
			_, _ = resp.Body.Read(buf) // the first byte: the stream is in flight
			started <- struct{}{}
			_, _ = io.Copy(io.Discard, resp.Body)
		}()
	}
	<-started
	<-started
	status, h, body := rawRequest(t, http.MethodPost, "/chat/completions", c.key, chatBody("demo-free", ""))
	checkOpenAIError(t, status, h, body, 429, "concurrency_limit_exceeded", "rate_limit_error", true)
	if h.Get("retry-after") != "5" {
		t.Errorf("Retry-After = %q, want 5", h.Get("retry-after"))
	}
	wg.Wait()
}

// TestRateLimit uses the tight tier (3 requests per minute).
func TestRateLimit(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{tier: "tight"})
	var last int
	var h http.Header
	var body []byte
	for i := 0; i < 4; i++ {
		last, h, body = rawRequest(t, http.MethodPost, "/chat/completions", c.key, chatBody("demo-free", ""))
		if i < 3 && last != 200 {
			// A request can straddle a minute boundary; then the window restarted.
			t.Logf("request %d: %d %s", i, last, body)
		}
	}
	if last == 200 {
		t.Skip("the requests straddled a minute boundary")
	}
	checkOpenAIError(t, last, h, body, 429, "rate_limit_exceeded", "rate_limit_error", true)
	if ra, err := strconv.Atoi(h.Get("retry-after")); err != nil || ra < 1 || ra > 60 {
		t.Errorf("Retry-After = %q", h.Get("retry-after"))
	}
}
