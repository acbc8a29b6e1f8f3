package envoy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/internal/demoenv"
	"github.com/llmgw/gateway/internal/testkit"
)

// admitPath plays an admitted request on path and checks the routing mutation.
func admitPath(t *testing.T, h *replay.Harness, path, body string) *replay.Exchange {
	t.Helper()
	x, _, resp := h.Post(t, path, []byte(body), bearer(keyPaid)...)
	c := resp.GetRequestBody().GetResponse()
	if c == nil {
		t.Fatalf("not admitted: %v", resp)
	}
	hs := setHeaders(t, c)
	if hs["x-gateway-upstream"] != "mock-providers" || !c.GetClearRouteCache() || !strings.HasPrefix(hs["authorization"], "Bearer sk-mock-") {
		t.Errorf("routing headers %v", hs)
	}
	if hs["accept-encoding"] != "identity" {
		t.Errorf("accept-encoding %q, want identity asked of the upstream", hs["accept-encoding"])
	}
	if bytes.Contains(c.GetBodyMutation().GetBody(), []byte(`"demo-`)) {
		t.Errorf("public model sent upstream: %s", c.GetBodyMutation().GetBody())
	}
	return x
}

func TestResponsesJSON(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	x := admitPath(t, h, "/v1/responses", `{"model":"demo-responses","input":"hello world","max_output_tokens":100,"x_vendor":1}`)
	up := `{"id":"resp_1","object":"response","status":"completed","model":"mock-gpt","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":10,"output_tokens":20,"total_tokens":30}}`
	r := x.Send(replay.ResponseHeaders(200, "content-type", "application/json", "content-length", strconv.Itoa(len(up))))
	checkMode(t, r, buffered, buffered)
	r = x.Send(replay.ResponseBody([]byte(up), true))
	if got := string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()); got != strings.Replace(up, "mock-gpt", "demo-responses", 1) {
		t.Errorf("body %s", got)
	}
	x.Close()
	// Hold: "hello world" is 2 tokens + 4 framing + 3 priming, and the unknown field
	// `"x_vendor":1` counts as JSON (4 tokens): 13, ×1.1 → 15, +64 = 79 at $1/M = 79;
	// 100 output tokens at $2/M = 200. Commit: 10 + 20×2 = 50.
	f.CheckCharged(t, 281, 50)
}

func TestResponsesStream(t *testing.T) {
	stream, err := os.ReadFile(filepath.Join("..", "response", "testdata", "responses_stream.sse"))
	if err != nil {
		t.Fatal(err)
	}
	for _, split := range []int{1, len(stream) / 3, len(stream) - 2} {
		f := newFake()
		h := replay.Start(t, replay.Service(t, f))
		x := admitPath(t, h, "/v1/responses", `{"model":"demo-responses","stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"hello world"}]}]}`)
		r := x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
		checkMode(t, r, buffered, streamed)
		var out bytes.Buffer
		for _, part := range [][]byte{stream[:split], stream[split:], nil} {
			r = x.Send(replay.ResponseBody(part, part == nil))
			out.Write(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
		}
		x.Close()
		if bytes.Contains(out.Bytes(), []byte(`"model":"gpt`)) || bytes.Count(out.Bytes(), []byte(`"model":"demo-responses"`)) != 3 {
			t.Fatalf("split %d: model not rewritten in every event:\n%s", split, out.String())
		}
		// Usage from response.completed: 37 in at $1/M + 11 out at $2/M = 37 + 22.
		if len(f.Commits) != 1 || f.Commits[0].Actual != 59 || f.Commits[0].Usage.InputTokens != 37 {
			t.Fatalf("split %d: commits %+v", split, f.Commits)
		}
	}
}

func TestStreamRewriteFailureEndsCleanly(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	x := admitPath(t, h, "/v1/responses", `{"model":"demo-responses","stream":true,"input":"x"}`)
	x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
	first := "data: {\"type\":\"response.output_text.delta\",\"delta\":\"hello world\"}\n\n"
	// The second event is over the 1 MiB event limit: the rewriter fails on it.
	huge := "data: {\"type\":\"response.output_text.delta\",\"response\":{\"model\":\"mock-gpt\"},\"delta\":\"" + strings.Repeat("a", 1<<20) + "\"}\n\n"
	r := x.Send(replay.ResponseBody([]byte(first+huge[:100]), false))
	if got := string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()); got != first {
		t.Fatalf("first chunk %q", got)
	}
	r = x.Send(replay.ResponseBody([]byte(huge[100:]), false))
	if b := r.GetResponseBody().GetResponse().GetBodyMutation(); b.GetClearBody() != true && len(b.GetBody()) != 0 {
		t.Fatalf("failing chunk passed: %v", b)
	}
	r = x.Send(replay.ResponseBody([]byte("data: {\"response\":{\"model\":\"mock-gpt\"}}\n\n"), true))
	if b := r.GetResponseBody().GetResponse().GetBodyMutation(); !b.GetClearBody() {
		t.Fatalf("chunk after the failure not dropped: %v", r)
	}
	x.Close()
	// Charged what was delivered: input "x" counted locally (1+4+3), output "hello world".
	if len(f.Commits) != 1 || f.Commits[0].Usage.InputTokens != 8 || f.Commits[0].Usage.OutputTokens != 2 || len(f.Releases) != 0 {
		t.Fatalf("commits %+v releases %v", f.Commits, f.Releases)
	}
}

func TestEmbeddings(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		hold       int64
		wantActual int64
	}{
		// "hello world" is 2 tokens: ×1.1 → 3, +64 = 67 at 100,000/M → 6.7 → 7.
		{name: "string", body: `{"model":"demo-embed","input":"hello world"}`, hold: 7, wantActual: 5},
		// Token arrays count by length (5), the margin on an empty text (64): 69 → 6.9 → 7.
		{name: "token arrays", body: `{"model":"demo-embed","input":[[1,2,3],[4,5]],"encoding_format":"base64","dimensions":8}`, hold: 7, wantActual: 5},
		// 1,000,000 token ids: exact 1,000,000 + 64 → 100,006.4 → 100,007.
		{name: "many tokens", body: `{"model":"demo-embed","input":[` + strings.TrimSuffix(strings.Repeat("7,", 1_000_000), ",") + `]}`, hold: 100_007, wantActual: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			h := replay.Start(t, replay.Service(t, f))
			x := admitPath(t, h, "/v1/embeddings", tt.body)
			r := x.Send(replay.ResponseHeaders(200, "content-type", "application/json", "content-length", "999"))
			checkMode(t, r, buffered, streamed)
			if rm := r.GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(); len(rm) != 1 || rm[0] != "content-length" {
				t.Errorf("removes %v", rm)
			}
			up := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"mock-embed","usage":{"prompt_tokens":50,"total_tokens":50}}`
			var out bytes.Buffer
			for i, part := range []string{up[:40], up[40:120], up[120:], ""} {
				r = x.Send(replay.ResponseBody([]byte(part), i == 3))
				out.Write(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
			}
			x.Close()
			if want := strings.Replace(up, "mock-embed", "demo-embed", 1); out.String() != want {
				t.Errorf("body %s", out.String())
			}
			// Commit: 50 tokens at 100,000/M = 5.
			f.CheckCharged(t, tt.hold, tt.wantActual)
		})
	}
}

func TestSpeech(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	// 11 code points (13 bytes) at 15,000,000/M = 165 micros, held and charged exactly.
	x := admitPath(t, h, "/v1/audio/speech", `{"model":"demo-tts","input":"héllo wörld","voice":"verse","response_format":"opus","speed":1.5}`)
	r := x.Send(replay.ResponseHeaders(200, "content-type", "audio/ogg"))
	checkMode(t, r, buffered, none)
	x.Close()
	f.CheckCharged(t, 165, 165)
	if f.Commits[0].Usage.Units["characters"] != 11 {
		t.Errorf("usage %+v", f.Commits[0].Usage)
	}

	// A 2xx that is not audio is an unusable response: released, not charged.
	f = newFake()
	h = replay.Start(t, replay.Service(t, f))
	x = admitPath(t, h, "/v1/audio/speech", `{"model":"demo-tts","input":"hi","voice":"alloy"}`)
	r = x.Send(replay.ResponseHeaders(200, "content-type", "text/html"))
	checkError(t, r, testkit.WantError(502, "upstream_error", "api_error"), false)
	x.Close()
	if len(f.Commits) != 0 || len(f.Releases) != 1 {
		t.Errorf("commits %v releases %v", f.Commits, f.Releases)
	}
}

func TestImages(t *testing.T) {
	tests := []struct {
		name   string
		status int
		ct     string
		body   string
		w      *testkit.APIError
		free   bool
	}{
		{name: "url", status: 200, ct: "application/json", body: `{"created":1,"data":[{"url":"https://images.mock.invalid/a.png","revised_prompt":"a cat"}]}`},
		{name: "b64", status: 200, ct: "application/json", body: `{"created":1,"data":[{"b64_json":"` + strings.Repeat("QUJD", 1<<20) + `"}]}`},
		// An empty "data" passes through (the headers already went out) and is not billed.
		{name: "no image", status: 200, ct: "application/json", body: `{"created":1,"data":[ ]}`, free: true},
		{name: "upstream out of funds", status: 429, ct: "application/json", body: `{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"quota"}}`, w: testkit.WantError(503, "upstream_account_unavailable", "api_error").WithRetry("").Ptr()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			h := replay.Start(t, replay.Service(t, f))
			x := admitPath(t, h, "/v1/images/generations", `{"model":"demo-image","prompt":"a cat","n":1,"size":"1024x1024","response_format":"url"}`)
			r := x.Send(replay.ResponseHeaders(tt.status, "content-type", tt.ct))
			// Errors are buffered to be replaced; images stream through, so a b64_json
			// body of any size never meets Envoy's buffer limit.
			wantMode := streamed
			if tt.w != nil {
				wantMode = buffered
			}
			checkMode(t, r, buffered, wantMode)
			if tt.w != nil {
				r = x.Send(replay.ResponseBody([]byte(tt.body), true))
			} else {
				// In two chunks split inside "data", then Envoy's empty last chunk.
				var got []byte
				half := len(tt.body) / 2
				for _, part := range [][]byte{[]byte(tt.body[:half]), []byte(tt.body[half:])} {
					r = x.Send(replay.ResponseBody(part, false))
					got = append(got, r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()...)
				}
				r = x.Send(replay.ResponseBody(nil, true))
				got = append(got, r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()...)
				if string(got) != tt.body {
					t.Errorf("body changed (%d bytes in, %d out)", len(tt.body), len(got))
				}
			}
			x.Close()
			if tt.free {
				if len(f.Commits) != 0 || len(f.Releases) != 1 {
					t.Errorf("commits %v releases %v", f.Commits, f.Releases)
				}
				return
			}
			if tt.w != nil {
				checkError(t, r, *tt.w, false)
				if len(f.Commits) != 0 || len(f.Releases) != 1 {
					t.Errorf("commits %v releases %v", f.Commits, f.Releases)
				}
				return
			}
			f.CheckCharged(t, 40000, 40000)
		})
	}
}

// withMultimodal swaps in a catalog where demo-embed has a channel serving multimodal
// embeddings.
func withMultimodal(t *testing.T) func(*lifecycle.Config) {
	const doc = `
models:
  - {id: demo-embed, kind: embeddings, prices: {input_per_mtok: 100000}}
channels:
  - {name: text-only, model: demo-embed, cluster: mock-providers, format: openai, upstream_model: mock-embed, credential_env: DEMO_OPENAI_KEY}
  - {name: mm, model: demo-embed, cluster: mm-cluster, format: openai, upstream_model: mock-mm, credential_env: DEMO_OPENAI_KEY, priority: 1, multimodal_embeddings: true}
clusters:
  - {name: mock-providers, address: "127.0.0.1:18080"}
  - {name: mm-cluster, address: "127.0.0.1:18081"}
`
	cat, err := catalog.Parse([]byte(doc), demoenv.Lookup, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *lifecycle.Config) { c.Catalog = cat }
}

func TestMultimodalEmbeddings(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f, withMultimodal(t)))
	// Text "a cat" (2 tokens) and one image part (2,000): ×1.1 on the text → 3, +64 +2000
	// = 2067 tokens at 100,000/M → 206.7 → 207.
	x, _, resp := h.Post(t, "/v1/embeddings/multimodal", []byte(`{"model":"demo-embed","input":[{"text":"a cat"},{"image":"https://x/y.png"}]}`), bearer(keyPaid)...)
	c := resp.GetRequestBody().GetResponse()
	if hs := setHeaders(t, c); hs["x-gateway-upstream"] != "mm-cluster" {
		t.Fatalf("routed to %v (only the multimodal channel serves the route)", hs)
	}
	x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
	r := x.Send(replay.ResponseBody([]byte(`{"object":"list","data":[{"embedding":[1]}],"model":"mock-mm","usage":{"prompt_tokens":900,"total_tokens":900}}`), true))
	if got := string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()); !strings.Contains(got, `"model":"demo-embed"`) {
		t.Errorf("body %s", got)
	}
	x.Close()
	f.CheckCharged(t, 207, 90)
	// Plain embeddings still go to the higher-priority text channel.
	x, _, resp = h.Post(t, "/v1/embeddings", []byte(`{"model":"demo-embed","input":"a"}`), bearer(keyPaid)...)
	if hs := setHeaders(t, resp.GetRequestBody().GetResponse()); hs["x-gateway-upstream"] != "mock-providers" {
		t.Errorf("embeddings routed to %v", hs)
	}
	x.Close()
}
