package e2e_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestCompressionNeverReachesTheClient sends the accept-encoding the SDKs send. The
// mock compresses whenever a request allows gzip, and [[mock:gzip]] makes it compress
// even when asked for identity (a provider ignoring the gateway's accept-encoding):
// every answer reaches the client plain, rewritten and charged, on rewritten paths
// (JSON, SSE) and on the path whose body bypasses extproc (speech audio).
func TestCompressionNeverReachesTheClient(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"json", "/chat/completions", `{"model":"demo-chat","messages":[{"role":"user","content":"hello [[mock:tokens=3]]"}]}`, `"model":"demo-chat"`},
		{"json upstream ignores identity", "/chat/completions", `{"model":"demo-chat","messages":[{"role":"user","content":"hello [[mock:gzip]] [[mock:tokens=3]]"}]}`, `"model":"demo-chat"`},
		{"sse upstream ignores identity", "/chat/completions", `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"hello [[mock:gzip]] [[mock:tokens=3]]"}]}`, "data: [DONE]"},
		{"messages upstream ignores identity", "/messages", `{"model":"demo-claude","max_tokens":50,"messages":[{"role":"user","content":"hello [[mock:gzip]]"}]}`, `"model":"demo-claude"`},
		{"speech bypasses extproc", "/audio/speech", `{"model":"demo-tts","input":"hello","voice":"alloy"}`, "ID3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := c.balance(t)
			status, h, body := rawRequest(t, http.MethodPost, tc.path, c.key, []byte(tc.body), "accept-encoding", "gzip, deflate, br, zstd")
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			if enc := h.Get("content-encoding"); enc != "" {
				t.Errorf("content-encoding %q reached the client", enc)
			}
			if !bytes.Contains(body, []byte(tc.want)) || bytes.Contains(body, []byte(`"model":"mock-`)) {
				t.Errorf("body %q", body[:min(len(body), 300)])
			}
			if strings.HasPrefix(h.Get("content-type"), "application/json") && h.Get("content-length") != "" && h.Get("content-length") != strconv.Itoa(len(body)) {
				t.Errorf("content-length %s for %d bytes", h.Get("content-length"), len(body))
			}
			if got := c.charged(t, before); got <= 0 {
				t.Errorf("charged %d", got)
			}
		})
	}
}

// TestLargeJSONAnswerPassesWhole: a non-streamed chat answer over Envoy's 2 MiB buffer
// limit (a BUFFERED body that large gets Envoy's own 500 while the provider billed the
// call) is rewritten as it passes and reaches the client whole, charged exactly its
// usage; compressed by the provider or not.
func TestLargeJSONAnswerPassesWhole(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	const pad = 3 << 20
	for _, gz := range []string{"", " [[mock:gzip]]"} {
		before := c.balance(t)
		body := `{"model":"demo-chat","max_tokens":64,"messages":[{"role":"user","content":"hello there [[mock:tokens=7]] [[mock:pad=` +
			strconv.Itoa(pad) + `]]` + gz + `"}]}`
		status, h, out := rawRequest(t, http.MethodPost, "/chat/completions", c.key, []byte(body))
		if status != 200 {
			t.Fatalf("%q: status %d: %.300s", gz, status, out)
		}
		var resp struct {
			Model   string `json:"model"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Usage struct {
				Prompt     int64 `json:"prompt_tokens"`
				Completion int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("%q: %v (%d bytes, content-length %q)", gz, err, len(out), h.Get("content-length"))
		}
		if resp.Model != "demo-chat" || len(resp.Choices) != 1 || len(resp.Choices[0].Message.Content) < pad {
			t.Fatalf("%q: model %q, %d choices", gz, resp.Model, len(resp.Choices))
		}
		want := tokenCost(resp.Usage.Prompt, resp.Usage.Completion, 1_000_000, 2_000_000)
		if resp.Usage.Completion != 7 || want <= 0 {
			t.Errorf("%q: usage %+v", gz, resp.Usage)
		}
		if got := c.charged(t, before); got != want {
			t.Errorf("%q: charged %d micros, want %d", gz, got, want)
		}
	}
}
