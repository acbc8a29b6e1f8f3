package openai

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/wire"
)

func TestParsedForBilling(t *testing.T) {
	tests := []struct {
		name  string
		parse func([]byte) (wire.Parsed, error)
		body  string
		want  wire.Parsed
	}{
		{
			name: "responses items", parse: wrap(ParseResponses),
			body: `{"model":"m","instructions":"be brief","max_output_tokens":9,"stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"x"}]},{"role":"assistant","content":"b"},{"type":"function_call_output","call_id":"c","output":"o"}]}`,
			want: wire.Parsed{Model: "m", Stream: true, MaxOutput: 9, MaxOutputParam: "max_output_tokens",
				Prompt: wire.Prompt{Texts: []string{"a", "b", "be brief"}, Messages: 3, Images: 1,
					JSON: []string{`{"type":"function_call_output","call_id":"c","output":"o"}`}}},
		},
		{
			name: "responses string", parse: wrap(ParseResponses), body: `{"model":"m","input":"hi"}`,
			want: wire.Parsed{Model: "m", Prompt: wire.Prompt{Texts: []string{"hi"}, Messages: 1}},
		},
		{
			name: "chat response_format, functions and prediction", parse: wrap(ParseChat),
			body: `{"model":"m","messages":[{"role":"user","content":"q"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object"}}},"functions":[{"name":"f"}],"prediction":{"type":"content","content":"old code"}}`,
			want: wire.Parsed{Model: "m", Prompt: wire.Prompt{Texts: []string{"q"}, Messages: 1, Tools: true,
				JSON:   []string{`"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object"}}}`, `"functions":[{"name":"f"}]`},
				Output: []string{`{"type":"content","content":"old code"}`}}},
		},
		{
			name: "chat media parts by kind", parse: wrap(ParseChat),
			body: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x"}},{"type":"input_audio","input_audio":{"data":"AAAAAAAA","format":"wav"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0="}},{"type":"file","file":{"file_id":"file-1"}}]}]}`,
			want: wire.Parsed{Model: "m", Prompt: wire.Prompt{Messages: 1, Images: 1, AudioBytes: 6,
				Documents: []wire.Document{{Param: "messages[0].content[2].file.file_data", Data: "data:application/pdf;base64,JVBERi0="}},
				Unbounded: "messages[0].content[3].file.file_id"}},
		},
		{
			name: "chat message fields", parse: wrap(ParseChat),
			body: `{"model":"m","messages":[{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},{"role":"assistant","content":null,"audio":{"id":"audio_1"}}]}`,
			want: wire.Parsed{Model: "m", Prompt: wire.Prompt{Messages: 2,
				JSON:      []string{`"function_call":{"name":"f","arguments":"{}"}`, `"audio":{"id":"audio_1"}`},
				Unbounded: "messages[1].audio"}},
		},
		{
			name: "responses text.format and files", parse: wrap(ParseResponses),
			body: `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_data":"JVBERi0="},{"type":"input_file","file_url":"https://x/a.pdf"}]}],"text":{"format":{"type":"json_schema","schema":{}}}}`,
			want: wire.Parsed{Model: "m", Prompt: wire.Prompt{Messages: 1,
				Documents: []wire.Document{{Param: "input[0].content[0].file_data", Data: "JVBERi0="}},
				JSON:      []string{`"text":{"format":{"type":"json_schema","schema":{}}}`},
				Unbounded: "input[0].content[1].file_url"}},
		},
		{
			name: "embeddings strings", parse: wrap(ParseEmbeddings), body: `{"model":"m","input":["a","b"]}`,
			want: wire.Parsed{Model: "m", Prompt: wire.Prompt{Texts: []string{"a", "b"}}},
		},
		{
			name: "embeddings token ids", parse: wrap(ParseEmbeddings), body: `{"model":"m","input":[0,1,2]}`,
			want: wire.Parsed{Model: "m", KnownTokens: 3},
		},
		{
			name: "multimodal", parse: wrap(ParseMultimodalEmbeddings), body: `{"model":"m","input":[{"text":"a"},{"image":"https://x"},"b"]}`,
			want: wire.Parsed{Model: "m", Prompt: wire.Prompt{Texts: []string{"a", "b"}, Images: 1}},
		},
		{
			name: "speech counts code points", parse: wrap(ParseSpeech), body: `{"model":"m","input":"日本語 ok","voice":"v"}`,
			want: wire.Parsed{Model: "m", Units: 6, Voice: "v"},
		},
		{
			name: "image is one unit", parse: wrap(ParseImages), body: `{"model":"m","prompt":"p","n":1.0}`,
			want: wire.Parsed{Model: "m", Units: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.parse([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Fatalf("parsed (-want +got):\n%s", d)
			}
		})
	}
}

func wrap(f func([]byte) (wire.Parsed, *apierr.Error)) func([]byte) (wire.Parsed, error) {
	return func(b []byte) (wire.Parsed, error) {
		p, e := f(b)
		if e != nil {
			return p, e
		}
		return p, nil
	}
}

// BenchmarkParseChat parses chat requests whose conversation is one short line, 4 KB
// and 32 KB of text (the parse's own cost: the tokenizer is not in it).
func BenchmarkParseChat(b *testing.B) {
	for _, size := range []int{0, 4 << 10, 32 << 10} {
		turn := strings.Repeat("Earlier turns of the conversation come back with every request. ", 1+size/2/64)
		body := []byte(`{"model":"demo-chat","messages":[{"role":"system","content":"You are helpful."},` +
			`{"role":"user","content":` + strconv.Quote(turn[:size/2]) + `},{"role":"assistant","content":` + strconv.Quote(turn[:size/2]) + `},` +
			`{"role":"user","content":"and now?"}],"max_tokens":256,"temperature":0.2,"stream":true,"stream_options":{"include_usage":true}}`)
		b.Run(strconv.Itoa(len(body)), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseChat(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
