package e2e_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestBodyLimitIsTheClientsBytes: the 2 MiB limit is about what the client sent, not what
// the gateway forwards. A body of exactly 2 MiB to demo-premium, whose upstream model id
// (mock-gpt-premium) is longer than its public one, so that the body forwarded upstream
// is larger than 2 MiB, is answered 200 and charged the price of its usage; one byte more
// is 413 request_body_too_large and charges nothing. Both with Content-Length and
// chunked without it.
func TestBodyLimitIsTheClientsBytes(t *testing.T) {
	t.Parallel()
	const limit = 2 << 20
	const inPerM, outPerM = 30_000_000, 60_000_000 // demo-premium
	c := newCustomer(t, customerOpts{topup: "10"})
	body := `{"model":"demo-premium","max_tokens":5,"messages":[{"role":"user","content":"alpha beta [[mock:tokens=2]]"}]}`
	for _, chunked := range []bool{false, true} {
		post := func(b []byte) (int, http.Header, []byte) {
			if chunked {
				return rawChunked(t, "/chat/completions", b, "authorization", "Bearer "+c.key)
			}
			return rawRequest(t, http.MethodPost, "/chat/completions", c.key, b)
		}
		name := map[bool]string{false: "content-length", true: "chunked"}[chunked]

		before := c.balance(t)
		status, _, b := post(padTo(t, body, limit))
		if status != 200 {
			t.Fatalf("%s, exactly 2 MiB: %d %s", name, status, b)
		}
		var resp struct {
			Model string `json:"model"`
			Usage struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(b, &resp); err != nil {
			t.Fatalf("%s: %v: %s", name, err, b)
		}
		u := resp.Usage
		if resp.Model != "demo-premium" || u.CompletionTokens != 2 {
			t.Errorf("%s: model %q, usage %+v", name, resp.Model, u)
		}
		after := micros(t, c.waitSettled(t), "balance")
		if want := tokenCost(u.PromptTokens, u.CompletionTokens, inPerM, outPerM); before-after != want || want == 0 {
			t.Errorf("%s: charged %d micros, want %d", name, before-after, want)
		}

		status, h, b := post(padTo(t, body, limit+1))
		checkOpenAIError(t, status, h, b, 413, "request_body_too_large", "invalid_request_error", false)
		if got := micros(t, c.waitSettled(t), "balance"); got != after {
			t.Errorf("%s, 2 MiB + 1: balance %d, was %d", name, got, after)
		}
	}
}
