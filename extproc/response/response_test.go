package response

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runeCount is a deterministic CountTokens for tests: one token per rune.
func runeCount(s string) int { return utf8.RuneCountInString(s) }

// feed runs chunks through a new Rewriter, the last with endOfStream, and returns the
// concatenated output.
func feed(t testing.TB, opts Options, chunks ...[]byte) ([]byte, Rewriter) {
	t.Helper()
	rw, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for i, c := range chunks {
		b, err := rw.Write(c, i == len(chunks)-1)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		out = append(out, b...)
	}
	return out, rw
}

// chunkings returns in as one chunk, as two chunks split at every offset, as two chunks
// and an empty final chunk (Envoy's usual end), and one byte at a time.
func chunkings(in []byte) [][][]byte {
	out := [][][]byte{{in}}
	for k := 0; k <= len(in); k++ {
		out = append(out, [][]byte{in[:k], in[k:]})
	}
	out = append(out, [][]byte{in[:len(in)/2], in[len(in)/2:], {}})
	var bytewise [][]byte
	for i := range in {
		bytewise = append(bytewise, in[i:i+1])
	}
	return append(out, append(bytewise, nil))
}

// lineEnds returns the SSE input and golden with "\n", "\r\n" and "\r" line ends (the
// recorded JSON holds no raw line breaks).
func lineEnds(in, golden []byte) map[string][2][]byte {
	m := map[string][2][]byte{"lf": {in, golden}}
	for name, end := range map[string]string{"crlf": "\r\n", "cr": "\r"} {
		m[name] = [2][]byte{
			bytes.ReplaceAll(in, []byte("\n"), []byte(end)),
			bytes.ReplaceAll(golden, []byte("\n"), []byte(end)),
		}
	}
	return m
}

func TestRewriteRecorded(t *testing.T) {
	tests := []struct {
		name, in, golden string
		opts             Options
		wantUsage        Usage
		wantDelivered    string // output text that reached the client
	}{
		{
			name: "chat stream without include_usage", in: "chat_stream.sse", golden: "chat_stream.golden.sse",
			opts:          Options{Format: OpenAIChat, PublicModel: "demo-chat", Stream: true, ClientWantsUsage: true},
			wantDelivered: "Hello! I run on gpt-4o-2024-08-06 \"model\": café\n\n😀 done.",
		},
		{
			name: "chat stream with include_usage the client asked for", in: "chat_stream_usage.sse", golden: "chat_stream_usage.golden.sse",
			opts:          Options{Format: OpenAIChat, PublicModel: "demo-chat", Stream: true, ClientWantsUsage: true},
			wantUsage:     Usage{InputTokens: 19, OutputTokens: 10, ServiceTier: "default"},
			wantDelivered: "Hello! I run on gpt-4o-2024-08-06 \"model\": café\n\n😀 done.",
		},
		{
			name: "chat stream with include_usage the gateway added", in: "chat_stream_usage.sse", golden: "chat_stream.golden.sse",
			opts:          Options{Format: OpenAIChat, PublicModel: "demo-chat", Stream: true},
			wantUsage:     Usage{InputTokens: 19, OutputTokens: 10, ServiceTier: "default"},
			wantDelivered: "Hello! I run on gpt-4o-2024-08-06 \"model\": café\n\n😀 done.",
		},
		{
			name: "chat tool-call stream", in: "chat_stream_tools.sse", golden: "chat_stream_tools.golden.sse",
			opts:          Options{Format: OpenAIChat, PublicModel: "demo-chat", Stream: true, ClientWantsUsage: true},
			wantUsage:     Usage{InputTokens: 84, OutputTokens: 24, CacheReadInputTokens: 64, ServiceTier: "default"},
			wantDelivered: `{"location":"Paris, France","model":"gpt-4o-mini-2024-07-18"}`,
		},
		{
			name: "anthropic stream with ping, text and tool_use", in: "anthropic_stream.sse", golden: "anthropic_stream.golden.sse",
			opts:          Options{Format: AnthropicMessages, PublicModel: "demo-claude", Stream: true},
			wantUsage:     Usage{InputTokens: 472 + 100 + 1024, OutputTokens: 89, CacheReadInputTokens: 1024, CacheWriteInputTokens: 100, ServiceTier: "standard"},
			wantDelivered: "Okay, let's checkthe weather for San Francisco, CA:\nmodel claude-sonnet-4-20250514" + `{"location":"San Francisco, CA", "model": "claude-sonnet-4-20250514"}`,
		},
		{
			name: "responses stream", in: "responses_stream.sse", golden: "responses_stream.golden.sse",
			opts:          Options{Format: OpenAIResponses, PublicModel: "demo-responses", Stream: true},
			wantUsage:     Usage{InputTokens: 37, OutputTokens: 11},
			wantDelivered: "Hi there! I am gpt-4.1-2025-04-14.\n",
		},
		{
			name: "chat completion body", in: "chat.json", golden: "chat.golden.json",
			opts:      Options{Format: OpenAIChat, PublicModel: "demo-chat"},
			wantUsage: Usage{InputTokens: 1117, OutputTokens: 46, CacheReadInputTokens: 1024, ServiceTier: "default"},
		},
		{
			name: "anthropic message body", in: "anthropic.json", golden: "anthropic.golden.json",
			opts:      Options{Format: AnthropicMessages, PublicModel: "demo-claude"},
			wantUsage: Usage{InputTokens: 2095 + 100 + 1024, OutputTokens: 503, CacheReadInputTokens: 1024, CacheWriteInputTokens: 100, ServiceTier: "standard"},
		},
		{
			name: "responses body", in: "responses.json", golden: "responses.golden.json",
			opts:      Options{Format: OpenAIResponses, PublicModel: "demo-responses"},
			wantUsage: Usage{InputTokens: 36, OutputTokens: 87},
		},
		{
			name: "embeddings body", in: "embeddings.json", golden: "embeddings.golden.json",
			opts:      Options{Format: OpenAIEmbeddings, PublicModel: "demo-embed"},
			wantUsage: Usage{InputTokens: 5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.CountTokens = runeCount
			variants := map[string][2][]byte{"lf": {read(t, tt.in), read(t, tt.golden)}}
			if tt.opts.Stream {
				variants = lineEnds(read(t, tt.in), read(t, tt.golden))
			}
			for ends, v := range variants {
				in, golden := v[0], v[1]
				for _, chunks := range chunkings(in) {
					out, rw := feed(t, tt.opts, chunks...)
					if !bytes.Equal(out, golden) {
						t.Fatalf("%s, %d chunks (first %d bytes): output differs from golden:\n%s",
							ends, len(chunks), len(chunks[0]), cmp.Diff(string(golden), string(out)))
					}
					u, ok := rw.Usage()
					if ok != (tt.wantUsage != Usage{}) || u != tt.wantUsage {
						t.Fatalf("%s: usage %+v, %v; want %+v", ends, u, ok, tt.wantUsage)
					}
					if tt.opts.Stream {
						d := rw.Delivered()
						if want := int64(runeCount(tt.wantDelivered)); d.OutputTokens != want {
							t.Fatalf("%s: delivered %d output tokens, want %d", ends, d.OutputTokens, want)
						}
					}
				}
			}
		})
	}
}

func TestStreamCut(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		opts      Options
		cutAfter  string // the stream breaks right after this text (and a partial event)
		wantText  string
		wantInput int64
	}{
		{
			name:      "chat stream cut in the fourth chunk",
			in:        "chat_stream_usage.sse",
			opts:      Options{Format: OpenAIChat, PublicModel: "demo-chat", Stream: true, InputTokens: 25},
			cutAfter:  `"delta":{"content":" I run`,
			wantText:  "Hello!",
			wantInput: 25,
		},
		{
			name:      "anthropic stream cut inside the tool_use block",
			in:        "anthropic_stream.sse",
			opts:      Options{Format: AnthropicMessages, PublicModel: "demo-claude", Stream: true, InputTokens: 9999},
			cutAfter:  `"partial_json":"\"San Francisc`,
			wantText:  "Okay, let's checkthe weather for San Francisco, CA:\nmodel claude-sonnet-4-20250514" + `{"location":`,
			wantInput: 472 + 100 + 1024, // message_start told
		},
		{
			name:      "responses stream cut before completed",
			in:        "responses_stream.sse",
			opts:      Options{Format: OpenAIResponses, PublicModel: "demo-responses", Stream: true, InputTokens: 40},
			cutAfter:  `"type":"response.output_text.done"`,
			wantText:  "Hi there! I am gpt-4.1-2025-04-14.\n",
			wantInput: 40,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := read(t, tt.in)
			cut := bytes.Index(in, []byte(tt.cutAfter))
			if cut < 0 {
				t.Fatal("cut point not in the recording")
			}
			in = in[:cut+len(tt.cutAfter)]
			tt.opts.CountTokens = runeCount
			for _, chunks := range chunkings(in)[:3] {
				rw, err := New(tt.opts)
				if err != nil {
					t.Fatal(err)
				}
				var out []byte
				for _, c := range chunks { // never endOfStream: the stream broke
					b, err := rw.Write(c, false)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, b...)
				}
				if _, ok := rw.Usage(); ok {
					t.Fatal("usage reported for a broken stream")
				}
				if bytes.Contains(out, []byte(tt.cutAfter)) {
					t.Fatal("the partial event was sent on")
				}
				d := rw.Delivered()
				if want := int64(runeCount(tt.wantText)); d.OutputTokens != want || d.InputTokens != tt.wantInput {
					t.Fatalf("delivered %+v, want output %d input %d", d, want, tt.wantInput)
				}
			}
		})
	}
}

func TestTruncatedTailAtEndOfStream(t *testing.T) {
	in := []byte("data: {\"model\":\"up\",\"choices\":[{\"delta\":{\"content\":\"ab\"}}]}\n\ndata: {\"model\":\"up\",\"choi")
	out, rw := feed(t, Options{Format: OpenAIChat, PublicModel: "pub", Stream: true, ClientWantsUsage: true, CountTokens: runeCount}, in)
	want := "data: {\"model\":\"pub\",\"choices\":[{\"delta\":{\"content\":\"ab\"}}]}\n\n"
	if string(out) != want {
		t.Fatalf("got %q, want %q", out, want)
	}
	if d := rw.Delivered(); d.OutputTokens != 2 {
		t.Fatalf("delivered %+v", d)
	}
}

func TestStreamEdgeCases(t *testing.T) {
	tests := []struct {
		name, in, want string
		opts           Options
	}{
		{
			name: "usage on the last content chunk is removed when the gateway asked for it",
			opts: Options{Format: OpenAIChat, PublicModel: "p", Stream: true},
			in:   "data: {\"model\":\"u\",\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\n",
			want: "data: {\"model\":\"p\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n",
		},
		{
			name: "usage null as the first member is removed with its comma",
			opts: Options{Format: OpenAIChat, PublicModel: "p", Stream: true},
			in:   "data: {\"usage\": null , \"model\":\"u\",\"choices\":[]}\n\n",
			want: "data: {\"model\":\"p\",\"choices\":[]}\n\n",
		},
		{
			name: "usage null kept when the client asked for usage",
			opts: Options{Format: OpenAIChat, PublicModel: "p", Stream: true, ClientWantsUsage: true},
			in:   "data: {\"model\":\"u\",\"choices\":[],\"usage\":null}\n\n",
			want: "data: {\"model\":\"p\",\"choices\":[],\"usage\":null}\n\n",
		},
		{
			name: "multi-line data event is rewritten and re-encoded",
			opts: Options{Format: OpenAIChat, PublicModel: "p", Stream: true, ClientWantsUsage: true},
			in:   "data: {\"model\":\ndata: \"u\",\"choices\":[]}\n\n",
			want: "data: {\"model\":\ndata: \"p\",\"choices\":[]}\n\n",
		},
		{
			name: "comments, blank lines and non-JSON data pass unchanged; an error event keeps its type, not the provider's words",
			opts: Options{Format: AnthropicMessages, PublicModel: "p", Stream: true},
			in:   ": keep-alive\n\n\nevent: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\ndata: not json\n\n",
			want: ": keep-alive\n\n\nevent: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"The upstream provider failed while streaming.\"}}\n\ndata: not json\n\n",
		},
		{
			name: "public model needing JSON escapes",
			opts: Options{Format: OpenAIResponses, PublicModel: `we"ird<model>`, Stream: true},
			in:   "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"model\":\"u\"}}\n\n",
			want: "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"model\":\"we\\\"ird<model>\"}}\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, chunks := range chunkings([]byte(tt.in)) {
				out, _ := feed(t, tt.opts, chunks...)
				if string(out) != tt.want {
					t.Fatalf("got %q, want %q", out, tt.want)
				}
			}
		})
	}
}

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		chunks  []string
		wantErr error
	}{
		{name: "body not JSON", opts: Options{Format: OpenAIChat, PublicModel: "p"}, chunks: []string{"<html>", "</html>"}, wantErr: ErrUnusable},
		{name: "body without choices", opts: Options{Format: OpenAIChat, PublicModel: "p"}, chunks: []string{`{"error":{"message":"x"}}`}, wantErr: ErrUnusable},
		{name: "anthropic body without content", opts: Options{Format: AnthropicMessages, PublicModel: "p"}, chunks: []string{`{"type":"error","error":{}}`}, wantErr: ErrUnusable},
		{name: "truncated body", opts: Options{Format: OpenAIResponses, PublicModel: "p"}, chunks: []string{`{"output":[`}, wantErr: ErrUnusable},
		{name: "body over the limit", opts: Options{Format: OpenAIChat, PublicModel: "p", MaxBodySize: 10}, chunks: []string{`{"choices":`, `[]}`}, wantErr: ErrTooLarge},
		{name: "event over the limit", opts: Options{Format: OpenAIChat, PublicModel: "p", Stream: true, MaxEventSize: 16}, chunks: []string{"data: {\"choices\":[]}\n\n"}, wantErr: ErrTooLarge},
		{name: "write after the end", opts: Options{Format: OpenAIChat, PublicModel: "p", Stream: true}, chunks: []string{"data: [DONE]\n\n", ""}, wantErr: ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rw, err := New(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var last error
			for i, c := range tt.chunks {
				eos := i == len(tt.chunks)-1
				if tt.wantErr == ErrClosed {
					eos = true
				}
				if _, last = rw.Write([]byte(c), eos); last != nil {
					break
				}
			}
			if !errors.Is(last, tt.wantErr) {
				t.Fatalf("err %v, want %v", last, tt.wantErr)
			}
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{name: "no format", opts: Options{PublicModel: "p"}},
		{name: "no model", opts: Options{Format: OpenAIChat}},
		{name: "streamed embeddings", opts: Options{Format: OpenAIEmbeddings, PublicModel: "p", Stream: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.opts); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestBodyDeliveredWithoutUsage(t *testing.T) {
	body := `{"id":"x","model":"u","choices":[{"index":0,"message":{"role":"assistant","content":"héllo","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}}]}`
	out, rw := feed(t, Options{Format: OpenAIChat, PublicModel: "p", CountTokens: runeCount, InputTokens: 7}, []byte(body))
	if !strings.Contains(string(out), `"model":"p"`) {
		t.Fatalf("model not rewritten: %s", out)
	}
	if _, ok := rw.Usage(); ok {
		t.Fatal("usage reported")
	}
	if d := rw.Delivered(); d != (Usage{InputTokens: 7, OutputTokens: 7}) {
		t.Fatalf("delivered %+v", d)
	}
}

func TestDefaultTokenEstimate(t *testing.T) {
	in := "data: {\"choices\":[{\"delta\":{\"content\":\"12345\"}}]}\n\n"
	_, rw := feed(t, Options{Format: OpenAIChat, PublicModel: "p", Stream: true}, []byte(in))
	if d := rw.Delivered(); d.OutputTokens != 2 {
		t.Fatalf("delivered %+v, want 2 tokens for 5 bytes", d)
	}
}

func TestLongStreamBoundedMemory(t *testing.T) {
	// 20 MB of streamed text: the held text stays under the flush size and is counted.
	ev := []byte("data: {\"model\":\"u\",\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("a", 1000) + "\"}}]}\n\n")
	counted := 0
	rw, err := New(Options{Format: OpenAIChat, PublicModel: "p", Stream: true, CountTokens: func(s string) int { counted += len(s); return len(s) }})
	if err != nil {
		t.Fatal(err)
	}
	s := rw.(*streamRewriter)
	for i := 0; i < 20000; i++ {
		if _, err := rw.Write(ev, false); err != nil {
			t.Fatal(err)
		}
		if len(s.text) >= textFlushSize || s.held() != 0 {
			t.Fatalf("held %d text bytes, %d event bytes", len(s.text), s.held())
		}
	}
	if d := rw.Delivered(); d.OutputTokens != 20000*1000 || counted != 20000*1000 {
		t.Fatalf("delivered %+v, counted %d", d, counted)
	}
}

// TestUpstreamModel: every rewriter reports the model id the upstream answered with
// (for traces), the first one seen, whatever the body's shape and split.
func TestUpstreamModel(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
		body string
	}{
		{"chat json", Options{Format: OpenAIChat}, `{"id":"c","model":"up-1","choices":[{"index":0,"message":{"role":"assistant","content":"x"}}]}`},
		{"chat json incremental", Options{Format: OpenAIChat, Incremental: true}, `{"id":"c","model":"up-1","choices":[{"index":0,"message":{"role":"assistant","content":"x"}}]}`},
		{"chat stream", Options{Format: OpenAIChat, Stream: true}, "data: {\"model\":\"up-1\",\"choices\":[]}\n\ndata: {\"model\":\"up-2\",\"choices\":[]}\n\ndata: [DONE]\n\n"},
		{"messages stream", Options{Format: AnthropicMessages, Stream: true},
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"up-1\",\"usage\":{\"input_tokens\":1}}}\n\n"},
		{"responses stream", Options{Format: OpenAIResponses, Stream: true},
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"model\":\"up-1\"}}\n\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.PublicModel = "public"
			rw, err := New(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(c.body)
			for i := range body {
				if _, err := rw.Write(body[i:i+1], i == len(body)-1); err != nil {
					t.Fatal(err)
				}
			}
			if got := rw.UpstreamModel(); got != "up-1" {
				t.Errorf("UpstreamModel = %q, want up-1", got)
			}
		})
	}
}
