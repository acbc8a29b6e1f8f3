package response

import (
	"strings"
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

// TestStreamErrorEventsLoseTheProvidersWords: an error event inside a same-format stream
// reaches the client with our message; its type and code stay.
func TestStreamErrorEventsLoseTheProvidersWords(t *testing.T) {
	for _, tc := range []struct {
		f    Format
		in   string
		keep string
	}{
		{OpenAIChat, "data: {\"error\":{\"message\":\"secret provider words\",\"type\":\"server_error\"}}\n\n", `"type":"server_error"`},
		{AnthropicMessages, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"secret provider words\"}}\n\n", `"overloaded_error"`},
		{OpenAIResponses, "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"secret provider words\",\"param\":null}\n\n", `"code":"server_error"`},
		{OpenAIResponses, "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r\",\"model\":\"m\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"secret provider words\"}}}\n\n", `"status":"failed"`},
	} {
		rw, err := New(Options{Format: tc.f, PublicModel: "public", Stream: true, ClientWantsUsage: true})
		if err != nil {
			t.Fatal(err)
		}
		out, err := rw.Write([]byte(tc.in), true)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "secret") || !strings.Contains(string(out), "failed while streaming") || !strings.Contains(string(out), tc.keep) {
			t.Errorf("%v: %s", tc.f, out)
		}
	}
}
