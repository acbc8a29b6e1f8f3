package envoy_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/webhook"
	"github.com/llmgw/gateway/internal/demoenv"
)

// fakeDNS resolves a fixed table; other names do not resolve.
type fakeDNS map[string]string

var _ webhook.Resolver = fakeDNS(nil)

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	ip, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	return []netip.Addr{netip.MustParseAddr(ip)}, nil
}

// withDNS wires the webhook validator to the fake resolver, with llmgw.dev as the
// service's own domain.
func withDNS(c *lifecycle.Config) {
	c.Webhooks = &webhook.Validator{
		Resolver: fakeDNS{"hooks.example.com": "93.184.215.14", "evil.example.com": "10.0.0.8", "gw.llmgw.dev": "93.184.215.20"},
		OwnHosts: []string{"llmgw.dev"},
	}
}

func TestEndpointErrors(t *testing.T) {
	const (
		responses  = "/v1/responses"
		embeddings = "/v1/embeddings"
		multimodal = "/v1/embeddings/multimodal"
		speech     = "/v1/audio/speech"
		images     = "/v1/images/generations"
		videos     = "/v1/video/generations"
	)
	bad := func(code, param string) want { return want{400, code, "invalid_request_error", param, false, ""} }
	tests := []struct {
		name     string
		path     string
		body     string
		headers  []string
		reserveE error
		w        want
		reserved bool
	}{
		// Responses (4.4)
		{name: "responses invalid json", path: responses, body: `{"model":`, w: bad("invalid_request", "")},
		{name: "responses model missing", path: responses, body: `{"input":"hi"}`, w: bad("invalid_model", "model")},
		{name: "responses model with space", path: responses, body: `{"model":"demo responses","input":"hi"}`, w: bad("invalid_model", "model")},
		{name: "responses input missing", path: responses, body: `{"model":"demo-responses"}`, w: bad("invalid_request", "input")},
		{name: "responses input number", path: responses, body: `{"model":"demo-responses","input":3}`, w: bad("invalid_request", "input")},
		{name: "responses input item not object", path: responses, body: `{"model":"demo-responses","input":["hi"]}`, w: bad("invalid_request", "input[0]")},
		{name: "responses part without type", path: responses, body: `{"model":"demo-responses","input":[{"role":"user","content":[{"text":"x"}]}]}`, w: bad("invalid_request", "input[0].content[0].type")},
		{name: "responses instructions number", path: responses, body: `{"model":"demo-responses","input":"hi","instructions":1}`, w: bad("invalid_request", "instructions")},
		{name: "responses max_output_tokens zero", path: responses, body: `{"model":"demo-responses","input":"hi","max_output_tokens":0}`, w: bad("invalid_max_tokens", "max_output_tokens")},
		{name: "responses max_output_tokens fraction", path: responses, body: `{"model":"demo-responses","input":"hi","max_output_tokens":2.5}`, w: bad("invalid_max_tokens", "max_output_tokens")},
		{name: "responses max_output_tokens above model", path: responses, body: `{"model":"demo-responses","input":"hi","max_output_tokens":4097}`, w: bad("invalid_max_tokens", "max_output_tokens")},
		{name: "responses stream string", path: responses, body: `{"model":"demo-responses","input":"hi","stream":"true"}`, w: bad("invalid_stream", "stream")},
		{name: "responses temperature", path: responses, body: `{"model":"demo-responses","input":"hi","temperature":-0.1}`, w: bad("invalid_request", "temperature")},
		{name: "responses top_p", path: responses, body: `{"model":"demo-responses","input":"hi","top_p":2}`, w: bad("invalid_request", "top_p")},
		{name: "responses tools not array", path: responses, body: `{"model":"demo-responses","input":"hi","tools":{}}`, w: bad("invalid_request", "tools")},
		{name: "responses metadata string", path: responses, body: `{"model":"demo-responses","input":"hi","metadata":"x"}`, w: bad("invalid_request", "metadata")},
		{name: "responses no key", path: responses, body: `{"model":"demo-responses","input":"hi"}`, headers: []string{}, w: want{401, "invalid_api_key", "invalid_request_error", "", false, ""}},
		{name: "responses suspended", path: responses, body: `{"model":"demo-responses","input":"hi"}`, headers: bearer(keySuspended), w: want{403, "account_suspended", "permission_error", "", false, ""}},
		{name: "responses embeddings model", path: responses, body: `{"model":"demo-embed","input":"hi"}`, w: want{403, "model_not_available", "permission_error", "model", false, ""}},
		{name: "responses not allowed", path: responses, body: `{"model":"demo-responses","input":"hi"}`, headers: bearer(keyScoped), w: want{403, "model_not_allowed", "permission_error", "model", false, ""}},
		{name: "responses requires top-up", path: responses, body: `{"model":"demo-responses","input":"hi"}`, headers: bearer(keyNew), w: want{403, "model_requires_topup", "permission_error", "model", false, ""}},
		{name: "responses insufficient", path: responses, body: `{"model":"demo-responses","input":"hi"}`, reserveE: ledger.Refuse(ledger.ReasonInsufficientCredits, ""), reserved: true, w: want{402, "insufficient_credits", "invalid_request_error", "", false, ""}},
		{name: "responses too large", path: responses, body: `{"model":"demo-responses","input":"` + strings.Repeat("a", 2<<20) + `"}`, w: want{413, "request_body_too_large", "invalid_request_error", "", false, ""}},
		// Embeddings (4.5)
		{name: "embeddings input missing", path: embeddings, body: `{"model":"demo-embed"}`, w: bad("invalid_request", "input")},
		{name: "embeddings empty string", path: embeddings, body: `{"model":"demo-embed","input":""}`, w: bad("invalid_request", "input")},
		{name: "embeddings empty array", path: embeddings, body: `{"model":"demo-embed","input":[]}`, w: bad("invalid_request", "input")},
		{name: "embeddings mixed array", path: embeddings, body: `{"model":"demo-embed","input":["a",1]}`, w: bad("invalid_request", "input")},
		{name: "embeddings object", path: embeddings, body: `{"model":"demo-embed","input":{"text":"a"}}`, w: bad("invalid_request", "input")},
		{name: "embeddings negative token", path: embeddings, body: `{"model":"demo-embed","input":[1,-2]}`, w: bad("invalid_request", "input")},
		{name: "embeddings fractional token", path: embeddings, body: `{"model":"demo-embed","input":[1,2.5]}`, w: bad("invalid_request", "input")},
		{name: "embeddings empty token array", path: embeddings, body: `{"model":"demo-embed","input":[[1],[]]}`, w: bad("invalid_request", "input")},
		{name: "embeddings encoding_format", path: embeddings, body: `{"model":"demo-embed","input":"a","encoding_format":"int8"}`, w: bad("invalid_request", "encoding_format")},
		{name: "embeddings dimensions zero", path: embeddings, body: `{"model":"demo-embed","input":"a","dimensions":0}`, w: bad("invalid_request", "dimensions")},
		{name: "embeddings dimensions fraction", path: embeddings, body: `{"model":"demo-embed","input":"a","dimensions":1.5}`, w: bad("invalid_request", "dimensions")},
		{name: "embeddings stream string", path: embeddings, body: `{"model":"demo-embed","input":"a","stream":1}`, w: bad("invalid_stream", "stream")},
		{name: "embeddings stream true", path: embeddings, body: `{"model":"demo-embed","input":"a","stream":true}`, w: bad("invalid_request", "stream")},
		{name: "embeddings chat model", path: embeddings, body: `{"model":"demo-chat","input":"a"}`, w: want{403, "model_not_available", "permission_error", "model", false, ""}},
		{name: "embeddings requires top-up", path: embeddings, body: `{"model":"demo-embed","input":"a"}`, headers: []string{"x-api-key", keyNew}, w: want{403, "model_requires_topup", "permission_error", "model", false, ""}},
		{name: "embeddings key limit", path: embeddings, body: `{"model":"demo-embed","input":"a"}`, reserveE: &ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, RetryAfter: 60, Limit: "daily"}, reserved: true, w: want{429, "key_limit_reached", "rate_limit_error", "", true, "60"}},
		{name: "multimodal without a channel that serves it", path: multimodal, body: `{"model":"demo-embed","input":[{"text":"a"}]}`, w: want{403, "model_not_available", "permission_error", "model", false, ""}},
		{name: "multimodal input missing", path: multimodal, body: `{"model":"demo-embed"}`, w: bad("invalid_request", "input")},
		// Speech (4.6)
		{name: "speech input missing", path: speech, body: `{"model":"demo-tts","voice":"alloy"}`, w: bad("invalid_request", "input")},
		{name: "speech input empty", path: speech, body: `{"model":"demo-tts","input":"","voice":"alloy"}`, w: bad("invalid_request", "input")},
		{name: "speech voice missing", path: speech, body: `{"model":"demo-tts","input":"hi"}`, w: bad("invalid_request", "voice")},
		{name: "speech voice not the model's", path: speech, body: `{"model":"demo-tts","input":"hi","voice":"nova"}`, w: bad("invalid_request", "voice")},
		{name: "speech format", path: speech, body: `{"model":"demo-tts","input":"hi","voice":"alloy","response_format":"ogg"}`, w: bad("invalid_request", "response_format")},
		{name: "speech speed zero", path: speech, body: `{"model":"demo-tts","input":"hi","voice":"alloy","speed":0}`, w: bad("invalid_request", "speed")},
		{name: "speech speed string", path: speech, body: `{"model":"demo-tts","input":"hi","voice":"alloy","speed":"1"}`, w: bad("invalid_request", "speed")},
		{name: "speech image model", path: speech, body: `{"model":"demo-image","input":"hi","voice":"alloy"}`, w: want{403, "model_not_available", "permission_error", "model", false, ""}},
		{name: "speech concurrency", path: speech, body: `{"model":"demo-tts","input":"hi","voice":"alloy"}`, reserveE: &ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded}, reserved: true, w: want{429, "concurrency_limit_exceeded", "rate_limit_error", "", true, "5"}},
		// Images (4.7)
		{name: "images prompt missing", path: images, body: `{"model":"demo-image"}`, w: bad("invalid_request", "prompt")},
		{name: "images prompt empty", path: images, body: `{"model":"demo-image","prompt":""}`, w: bad("invalid_request", "prompt")},
		{name: "images n two", path: images, body: `{"model":"demo-image","prompt":"a cat","n":2}`, w: bad("invalid_n", "n")},
		{name: "images n string", path: images, body: `{"model":"demo-image","prompt":"a cat","n":"1"}`, w: bad("invalid_n", "n")},
		{name: "images response_format", path: images, body: `{"model":"demo-image","prompt":"a cat","response_format":"png"}`, w: bad("invalid_request", "response_format")},
		{name: "images size number", path: images, body: `{"model":"demo-image","prompt":"a cat","size":1024}`, w: bad("invalid_request", "size")},
		{name: "images model missing", path: images, body: `{"prompt":"a cat"}`, w: bad("invalid_model", "model")},
		{name: "images rate limit", path: images, body: `{"model":"demo-image","prompt":"a cat"}`, reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, RetryAfter: 7}, reserved: true, w: want{429, "rate_limit_exceeded", "rate_limit_error", "", true, "7"}},
		// Video submission
		{name: "video duration too short", path: videos, body: `{"model":"demo-video","prompt":"a wave","duration":1}`, w: bad("invalid_duration", "duration")},
		{name: "video duration too long", path: videos, body: `{"model":"demo-video","prompt":"a wave","duration":16}`, w: bad("invalid_duration", "duration")},
		{name: "video duration fraction", path: videos, body: `{"model":"demo-video","prompt":"a wave","duration":2.5}`, w: bad("invalid_duration", "duration")},
		{name: "video duration string", path: videos, body: `{"model":"demo-video","prompt":"a wave","duration":"5"}`, w: bad("invalid_duration", "duration")},
		{name: "video duration zero", path: videos, body: `{"model":"demo-video","prompt":"a wave","duration":0}`, w: bad("invalid_duration", "duration")},
		{name: "video resolution other tier", path: videos, body: `{"model":"demo-video","prompt":"a wave","resolution":"1080p"}`, w: bad("resolution_not_priced", "resolution")},
		{name: "video tier in prompt", path: videos, body: `{"model":"demo-video","prompt":"a wave in 4K"}`, w: bad("resolution_not_priced", "resolution")},
		{name: "video webhook http", path: videos, body: `{"model":"demo-video","prompt":"a wave","webhook_url":"http://hooks.example.com/x"}`, w: bad("invalid_webhook_url", "webhook_url")},
		{name: "video webhook ip", path: videos, body: `{"model":"demo-video","prompt":"a wave","webhook_url":"https://0x7f.1/x"}`, w: bad("invalid_webhook_url", "webhook_url")},
		{name: "video webhook resolves private", path: videos, body: `{"model":"demo-video","prompt":"a wave","webhook_url":"https://evil.example.com/x"}`, w: bad("invalid_webhook_url", "webhook_url")},
		{name: "video webhook own domain", path: videos, body: `{"model":"demo-video","prompt":"a wave","webhook_url":"https://gw.llmgw.dev/x"}`, w: bad("invalid_webhook_url", "webhook_url")},
		{name: "video webhook does not resolve", path: videos, body: `{"model":"demo-video","prompt":"a wave","webhook_url":"https://nx.example.com/x"}`, w: bad("invalid_webhook_url", "webhook_url")},
		{name: "video stream", path: videos, body: `{"model":"demo-video","prompt":"a wave","stream":true}`, w: bad("invalid_request", "stream")},
		{name: "video chat model", path: videos, body: `{"model":"demo-chat","prompt":"a wave"}`, w: want{403, "model_not_available", "permission_error", "model", false, ""}},
		{name: "video insufficient", path: videos, body: `{"model":"demo-video","prompt":"a wave"}`, reserveE: ledger.Refuse(ledger.ReasonInsufficientCredits, ""), reserved: true, w: want{402, "insufficient_credits", "invalid_request_error", "", false, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.ReserveE = tt.reserveE
			h := replay.Start(t, replay.Service(t, f, withDNS))
			headers := tt.headers
			if headers == nil {
				headers = bearer(keyPaid)
			}
			x, hdr, body := h.Post(t, tt.path, []byte(tt.body), headers...)
			resp := body
			if resp == nil {
				resp = hdr
			}
			checkError(t, resp, tt.w, false)
			if tt.w.code == "invalid_duration" && !strings.Contains(string(resp.GetImmediateResponse().GetBody()), "from 2 to 15") {
				t.Errorf("message does not name the range: %s", resp.GetImmediateResponse().GetBody())
			}
			x.Close()
			reserves, commits, releases := f.Counts()
			if tt.reserved != (reserves == 1) || commits != 0 || releases != 0 {
				t.Errorf("ledger saw %d reserves, %d commits, %d releases", reserves, commits, releases)
			}
		})
	}
}

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

// ledgerCheck asserts one hold of amount and one commit of actual (no release).
func ledgerCheck(t *testing.T, f *replay.FakeLedger, hold, actual int64) {
	t.Helper()
	if len(f.Reserves) != 1 || f.Reserves[0].Amount != hold {
		t.Errorf("reserves %+v, want one hold of %d", f.Reserves, hold)
	}
	if len(f.Commits) != 1 || f.Commits[0].Actual != actual || len(f.Releases) != 0 {
		t.Errorf("commits %+v releases %v, want one commit of %d", f.Commits, f.Releases, actual)
	}
}

func TestResponsesJSON(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	x := admitPath(t, h, "/v1/responses", `{"model":"demo-responses","input":"hello world","max_output_tokens":100,"x_vendor":1}`)
	up := `{"id":"resp_1","object":"response","status":"completed","model":"mock-gpt","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":10,"output_tokens":20,"total_tokens":30}}`
	r := x.Send(replay.ResponseHeaders(200, "content-type", "application/json", "content-length", strconv.Itoa(len(up))))
	if r.GetModeOverride().GetResponseBodyMode().String() != "BUFFERED" {
		t.Fatalf("mode %v", r.GetModeOverride())
	}
	r = x.Send(replay.ResponseBody([]byte(up), true))
	if got := string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()); got != strings.Replace(up, "mock-gpt", "demo-responses", 1) {
		t.Errorf("body %s", got)
	}
	x.Close()
	// Hold: "hello world" is 2 tokens + 4 framing + 3 priming, and the unknown field
	// `"x_vendor":1` counts as JSON (4 tokens): 13, ×1.1 → 15, +64 = 79 at $1/M = 79;
	// 100 output tokens at $2/M = 200. Commit: 10 + 20×2 = 50.
	ledgerCheck(t, f, 281, 50)
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
		if r.GetModeOverride().GetResponseBodyMode().String() != "STREAMED" {
			t.Fatalf("mode %v", r.GetModeOverride())
		}
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
			if r.GetModeOverride().GetResponseBodyMode().String() != "STREAMED" {
				t.Fatalf("mode %v", r.GetModeOverride())
			}
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
			ledgerCheck(t, f, tt.hold, tt.wantActual)
		})
	}
}

func TestSpeech(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	// 11 code points (13 bytes) at 15,000,000/M = 165 micros, held and charged exactly.
	x := admitPath(t, h, "/v1/audio/speech", `{"model":"demo-tts","input":"héllo wörld","voice":"verse","response_format":"opus","speed":1.5}`)
	r := x.Send(replay.ResponseHeaders(200, "content-type", "audio/ogg"))
	if r.GetModeOverride().GetResponseBodyMode().String() != "NONE" {
		t.Fatalf("mode %v", r.GetModeOverride())
	}
	x.Close()
	ledgerCheck(t, f, 165, 165)
	if f.Commits[0].Usage.Units["characters"] != 11 {
		t.Errorf("usage %+v", f.Commits[0].Usage)
	}

	// A 2xx that is not audio is an unusable response: released, not charged.
	f = newFake()
	h = replay.Start(t, replay.Service(t, f))
	x = admitPath(t, h, "/v1/audio/speech", `{"model":"demo-tts","input":"hi","voice":"alloy"}`)
	r = x.Send(replay.ResponseHeaders(200, "content-type", "text/html"))
	checkError(t, r, want{502, "upstream_error", "api_error", "", false, ""}, false)
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
		w      *want
		free   bool
	}{
		{name: "url", status: 200, ct: "application/json", body: `{"created":1,"data":[{"url":"https://images.mock.invalid/a.png","revised_prompt":"a cat"}]}`},
		{name: "b64", status: 200, ct: "application/json", body: `{"created":1,"data":[{"b64_json":"` + strings.Repeat("QUJD", 1<<20) + `"}]}`},
		// An empty "data" passes through (the headers already went out) and is not billed.
		{name: "no image", status: 200, ct: "application/json", body: `{"created":1,"data":[ ]}`, free: true},
		{name: "upstream out of funds", status: 429, ct: "application/json", body: `{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"quota"}}`, w: &want{503, "upstream_account_unavailable", "api_error", "", true, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			h := replay.Start(t, replay.Service(t, f))
			x := admitPath(t, h, "/v1/images/generations", `{"model":"demo-image","prompt":"a cat","n":1,"size":"1024x1024","response_format":"url"}`)
			r := x.Send(replay.ResponseHeaders(tt.status, "content-type", tt.ct))
			// Errors are buffered to be replaced; images stream through, so a b64_json
			// body of any size never meets Envoy's buffer limit.
			wantMode := "STREAMED"
			if tt.w != nil {
				wantMode = "BUFFERED"
			}
			if r.GetModeOverride().GetResponseBodyMode().String() != wantMode {
				t.Fatalf("mode %v", r.GetModeOverride())
			}
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
			ledgerCheck(t, f, 40000, 40000)
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
	ledgerCheck(t, f, 207, 90)
	// Plain embeddings still go to the higher-priority text channel.
	x, _, resp = h.Post(t, "/v1/embeddings", []byte(`{"model":"demo-embed","input":"a"}`), bearer(keyPaid)...)
	if hs := setHeaders(t, resp.GetRequestBody().GetResponse()); hs["x-gateway-upstream"] != "mock-providers" {
		t.Errorf("embeddings routed to %v", hs)
	}
	x.Close()
}
