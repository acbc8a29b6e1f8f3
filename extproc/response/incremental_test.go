package response

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestIncrementalEmbeddings(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      string
		wantUsage Usage
		usageOK   bool
	}{
		{
			name:      "model first, compact",
			in:        `{"model":"mock-embed","object":"list","data":[{"embedding":"AAAA","index":0}],"usage":{"prompt_tokens":3,"total_tokens":3}}`,
			want:      `{"model":"demo-embed","object":"list","data":[{"embedding":"AAAA","index":0}],"usage":{"prompt_tokens":3,"total_tokens":3}}`,
			wantUsage: Usage{InputTokens: 3}, usageOK: true,
		},
		{
			name: "nested model members are not the model",
			in:   `{"data":[{"model":"x","s":"}]\"model\""}],"meta":{"model":"y"},"model" : "m","usage":null}`,
			want: `{"data":[{"model":"x","s":"}]\"model\""}],"meta":{"model":"y"},"model" : "demo-embed","usage":null}`,
		},
		{
			name: "non-string model kept, scalars at the end",
			in:   "{\"data\":[],\"model\":null,\"n\":12}\n",
			want: "{\"data\":[],\"model\":null,\"n\":12}\n",
		},
		{
			name: "escaped key is not model",
			in:   `{"mod\"el":"a","data":[1,2.5e3,true]}`,
			want: `{"mod\"el":"a","data":[1,2.5e3,true]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, chunks := range chunkings([]byte(tt.in)) {
				out, rw := feed(t, Options{Format: OpenAIEmbeddings, PublicModel: "demo-embed"}, chunks...)
				if string(out) != tt.want {
					t.Fatalf("%d chunks (first %d bytes): out %s", len(chunks), len(chunks[0]), out)
				}
				if u, ok := rw.Usage(); ok != tt.usageOK || u != tt.wantUsage {
					t.Fatalf("usage %+v %v", u, ok)
				}
			}
		})
	}
}

func TestIncrementalErrors(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		err    error
		sent   string // bytes returned before the error
	}{
		{name: "html", chunks: []string{"<html>"}, err: ErrUnusable},
		{name: "array", chunks: []string{"[1]"}, err: ErrUnusable},
		{name: "truncated", chunks: []string{`{"data":[1,`, ``}, err: ErrUnusable, sent: `{"data":[1,`},
		{name: "no data", chunks: []string{`{"error":{"message":"x"}}`}, err: ErrUnusable, sent: `{"error":{"message":"x"}}`},
		{name: "garbage after key", chunks: []string{`{"data" 1}`}, err: ErrUnusable, sent: `{"data" `},
		{name: "model value too large", chunks: []string{`{"model":"` + strings.Repeat("m", 40)}, err: ErrTooLarge, sent: `{"model":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rw, err := New(Options{Format: OpenAIEmbeddings, PublicModel: "p", MaxEventSize: 32})
			if err != nil {
				t.Fatal(err)
			}
			var sent []byte
			var last error
			for i, c := range tt.chunks {
				var b []byte
				b, last = rw.Write([]byte(c), i == len(tt.chunks)-1)
				sent = append(sent, b...)
				if last != nil {
					break
				}
			}
			if !errors.Is(last, tt.err) || string(sent) != tt.sent {
				t.Fatalf("err %v sent %q; want %v %q", last, sent, tt.err, tt.sent)
			}
			if _, err := rw.Write(nil, true); err == nil {
				t.Fatal("write after an error succeeded")
			}
		})
	}
}

func TestIncrementalBoundedMemory(t *testing.T) {
	// 32 MB of embeddings pass through with nothing held but the model value.
	rw, err := New(Options{Format: OpenAIEmbeddings, PublicModel: "p"})
	if err != nil {
		t.Fatal(err)
	}
	ir := rw.(*incrementalRewriter)
	item := []byte(`{"object":"embedding","index":0,"embedding":[` + strings.Repeat("0.0123456,", 99) + `1]},`)
	total := 0
	write := func(b []byte, eos bool) {
		t.Helper()
		out, err := rw.Write(b, eos)
		if err != nil {
			t.Fatal(err)
		}
		total += len(out)
		if cap(ir.held) > 64 || cap(ir.usageCp) > 256 {
			t.Fatalf("held %d bytes, usage copy %d", cap(ir.held), cap(ir.usageCp))
		}
	}
	write([]byte(`{"object":"list","data":[`), false)
	n := 0
	for n < 32<<20 {
		write(item, false)
		n += len(item)
	}
	write([]byte(`{}],"model":"upstream-model","usage":{"prompt_tokens":9,"total_tokens":9}}`), true)
	if u, ok := rw.Usage(); !ok || u.InputTokens != 9 {
		t.Fatalf("usage %+v %v", u, ok)
	}
	if want := len(`{"object":"list","data":[`) + n + len(`{}],"model":"p","usage":{"prompt_tokens":9,"total_tokens":9}}`); total != want {
		t.Fatalf("sent %d bytes, want %d", total, want)
	}
}

func TestOtherJSONFormats(t *testing.T) {
	tests := []struct {
		name string
		f    Format
		in   string
		want string
		err  error
	}{
		{name: "image url", f: OpenAIImages, in: `{"created":1,"data":[{"url":"https://x/y.png"}]}`, want: `{"created":1,"data":[{"url":"https://x/y.png"}]}`},
		{name: "image with model", f: OpenAIImages, in: `{"created":1,"model":"mock-image","data":[{}]}`, want: `{"created":1,"model":"pub","data":[{}]}`},
		{name: "image without data", f: OpenAIImages, in: `{"created":1}`, err: ErrUnusable},
		{name: "video task", f: VideoTask, in: `{"id":"vid_1","model":"mock-video","status":"queued"}`, want: `{"id":"vid_1","model":"pub","status":"queued"}`},
		{name: "video without id", f: VideoTask, in: `{"status":"queued"}`, err: ErrUnusable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rw, err := New(Options{Format: tt.f, PublicModel: "pub"})
			if err != nil {
				t.Fatal(err)
			}
			out, err := rw.Write([]byte(tt.in), true)
			if !errors.Is(err, tt.err) || (err == nil && !bytes.Equal(out, []byte(tt.want))) {
				t.Fatalf("out %s err %v", out, err)
			}
			if _, ok := rw.Usage(); ok {
				t.Fatal("usage reported")
			}
		})
	}
	if _, err := New(Options{Format: VideoTask, PublicModel: "p", Stream: true}); err == nil {
		t.Fatal("streamed video task accepted")
	}
}

// BenchmarkIncrementalEmbeddings measures the embeddings rewrite on a 1 MB body fed in
// 64 KiB chunks.
func BenchmarkIncrementalEmbeddings(b *testing.B) {
	item := `{"object":"embedding","index":0,"embedding":[` + strings.Repeat("0.0123456,", 99) + `1]},`
	body := []byte(`{"object":"list","data":[` + strings.Repeat(item, 1<<20/len(item)) + `{}],"model":"m","usage":{"prompt_tokens":9,"total_tokens":9}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		rw, _ := New(Options{Format: OpenAIEmbeddings, PublicModel: "p"})
		for i := 0; i < len(body); i += 64 << 10 {
			end := min(i+64<<10, len(body))
			if _, err := rw.Write(body[i:end], end == len(body)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// TestIncrementalChatMessagesResponses: a chat, messages or responses body rewritten
// incrementally (a body too large or of unknown size for Envoy's buffer) comes out as
// the buffered rewriter makes it, with the usage read in the format's own shape.
func TestIncrementalChatMessagesResponses(t *testing.T) {
	tests := []struct {
		format Format
		in     string
		want   Usage
	}{
		{OpenAIChat, `{"id":"c","model":"mock-gpt","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}`,
			Usage{InputTokens: 10, OutputTokens: 3, CacheReadInputTokens: 4}},
		{AnthropicMessages, `{"id":"m","model":"mock-claude","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":7,"output_tokens":2,"cache_read_input_tokens":5}}`,
			Usage{InputTokens: 12, OutputTokens: 2, CacheReadInputTokens: 5}},
		{OpenAIResponses, `{"id":"r","output":[{"content":[{"text":"hi"}]}],"model":"mock-gpt","usage":{"input_tokens":8,"output_tokens":6}}`,
			Usage{InputTokens: 8, OutputTokens: 6}},
	}
	for _, tt := range tests {
		t.Run(tt.format.String(), func(t *testing.T) {
			whole, bw := feed(t, Options{Format: tt.format, PublicModel: "demo"}, []byte(tt.in))
			if u, ok := bw.Usage(); !ok || u != tt.want {
				t.Fatalf("buffered usage %+v %v", u, ok)
			}
			for _, chunks := range chunkings([]byte(tt.in)) {
				out, rw := feed(t, Options{Format: tt.format, PublicModel: "demo", Incremental: true}, chunks...)
				if string(out) != string(whole) {
					t.Fatalf("%d chunks: out %s, want %s", len(chunks), out, whole)
				}
				if u, ok := rw.Usage(); !ok || u != tt.want {
					t.Fatalf("usage %+v %v, want %+v", u, ok, tt.want)
				}
			}
		})
	}
}
