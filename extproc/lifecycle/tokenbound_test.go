package lifecycle_test

import (
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/tokens"
)

// TestTokenBoundReachesTheReserve: every reservation carries the request's token bound,
// which tokens-per-minute limits take: the hold's input bound plus its output limit on
// the token endpoints (free models included), the input's bound on embeddings, and no
// tokens on the endpoints billed by units.
func TestTokenBoundReachesTheReserve(t *testing.T) {
	// "hi" in a user message: 8 tokens with the message framing (the chat endpoints'
	// count), held with the margin: ceil(8 × 1.1) + MarginFlat.
	const chatInput = 9 + tokens.MarginFlat
	tests := []struct {
		name, path, body string
		want             int64
	}{
		{name: "chat paid", path: "/v1/chat/completions", want: chatInput + 100,
			body: `{"model":"demo-chat","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "chat free", path: "/v1/chat/completions", want: chatInput + 100,
			body: `{"model":"demo-free","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "chat free without limit: the model's", path: "/v1/chat/completions", want: chatInput + 4096,
			body: `{"model":"demo-free","messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages", path: "/v1/messages", want: chatInput + 100,
			body: `{"model":"demo-claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "responses", path: "/v1/responses", want: chatInput + 100,
			body: `{"model":"demo-responses","max_output_tokens":100,"input":"hi"}`},
		// Embeddings: the texts' tokens with the margin, token ids exactly.
		{name: "embeddings text", path: "/v1/embeddings", want: 2 + tokens.MarginFlat,
			body: `{"model":"demo-embed","input":"hi"}`},
		{name: "embeddings token ids", path: "/v1/embeddings", want: tokens.MarginFlat + 3,
			body: `{"model":"demo-embed","input":[1,2,3]}`},
		{name: "speech", path: "/v1/audio/speech", want: 0,
			body: `{"model":"demo-tts","input":"hello","voice":"alloy"}`},
		{name: "images", path: "/v1/images/generations", want: 0,
			body: `{"model":"demo-image","prompt":"a cat"}`},
		{name: "video", path: "/v1/video/generations", want: 0,
			body: `{"model":"demo-video","prompt":"a wave"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := replay.DemoLedger()
			svc := replay.Service(t, f, withDNS)
			r, a := post(t, svc, tt.path, tt.body, bearer(replay.KeyPaid)...)
			mustAdmit(t, a)
			finish(t, svc, r)
			if len(f.Reserves) != 1 {
				t.Fatalf("admitted with %d reservations", len(f.Reserves))
			}
			if got := f.Reserves[0].Tokens; got != tt.want {
				t.Errorf("token bound %d, want %d", got, tt.want)
			}
		})
	}
}
