package response

import (
	"testing"
)

// TestChatEventEndingInsideContainer: an event whose JSON stops right after an opening
// bracket or a member's colon is not a JSON object: complete, it passes unchanged;
// as the truncated tail of a stream, it is not sent on. Neither may panic.
func TestChatEventEndingInsideContainer(t *testing.T) {
	datas := []string{
		`{"choices":[`,
		`{"choices":[ `,
		`{"choices":[{"delta":`,
		`{"choices":[{"delta":{"content":`,
		`{"choices":[{"delta":{"content":"a",`,
		`{"model":`,
		`{"choices":[{"index":0,`,
	}
	formats := []Format{OpenAIChat, AnthropicMessages, OpenAIResponses}
	for _, data := range datas {
		for _, f := range formats {
			t.Run(f.String()+" "+data, func(t *testing.T) {
				opts := Options{Format: f, PublicModel: "p", Stream: true}
				complete := "data: " + data + "\n\n"
				if out, _ := feed(t, opts, []byte(complete)); string(out) != complete {
					t.Fatalf("complete event: got %q, want it unchanged", out)
				}
				if out, _ := feed(t, opts, []byte("data: "+data)); len(out) != 0 {
					t.Fatalf("truncated tail: got %q, want nothing", out)
				}
			})
		}
	}
}

// FuzzStreamRewrite feeds arbitrary bytes as an event stream of every streamed format, in
// two chunks: Write never panics, and once the stream is done every further Write fails.
func FuzzStreamRewrite(f *testing.F) {
	f.Add([]byte("data: {\"model\":\"u\",\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}\n\n"), 10)
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"u\",\"usage\":{\"input_tokens\":3}}}\n\n"), 5)
	f.Add([]byte("data: {\"type\":\"response.completed\",\"response\":{\"model\":\"u\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}}\n\n"), 0)
	f.Add([]byte("data: {\"choices\":[{\"delta\":"), 3)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		if cut < 0 || cut > len(in) {
			cut = len(in) / 2
		}
		for _, fm := range []Format{OpenAIChat, AnthropicMessages, OpenAIResponses} {
			for _, wants := range []bool{false, true} {
				rw, err := New(Options{Format: fm, PublicModel: "p", Stream: true, ClientWantsUsage: wants, MaxEventSize: 1 << 12})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := rw.Write(in[:cut], false); err != nil {
					continue
				}
				_, _ = rw.Write(in[cut:], true)
				_ = rw.Delivered()
				if _, err := rw.Write(nil, true); err == nil {
					t.Fatalf("%v: Write after the end succeeded", fm)
				}
			}
		}
	})
}
