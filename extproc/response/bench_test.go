package response

import (
	"bytes"
	"testing"
)

// benchChunks is the recorded chat stream (with include_usage) cut the way an upstream
// delivers it: one chunk per event, then Envoy's empty end-of-stream chunk.
func benchChunks(b *testing.B) ([][]byte, int) {
	in := read(b, "chat_stream_usage.sse")
	var chunks [][]byte
	for len(in) > 0 {
		i := bytes.Index(in, []byte("\n\n")) + 2
		chunks = append(chunks, in[:i])
		in = in[i:]
	}
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	return append(chunks, nil), n
}

// BenchmarkRewriteChatStream rewrites a whole chat stream (model in every chunk, usage
// read, the gateway's usage removed) with a new Rewriter per stream.
func BenchmarkRewriteChatStream(b *testing.B) {
	chunks, n := benchChunks(b)
	opts := Options{Format: OpenAIChat, PublicModel: "demo-chat", Stream: true}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		rw, _ := New(opts)
		for i, c := range chunks {
			if _, err := rw.Write(c, i == len(chunks)-1); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCopy is the baseline: the same chunks, each copied into a new slice owned by
// the caller (what a Rewriter that changed nothing would have to return).
func BenchmarkCopy(b *testing.B) {
	chunks, n := benchChunks(b)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	var sink []byte
	for b.Loop() {
		for _, c := range chunks {
			out := make([]byte, len(c))
			copy(out, c)
			sink = out
		}
	}
	_ = sink
}

// BenchmarkRewriteChatChunk rewrites one usual chunk of a running stream (a content
// delta, the stream's first chunk already written): what each chunk of a long stream
// costs, without the per-stream work BenchmarkRewriteChatStream includes (the
// rewriter's allocation, the first chunk walked whole, the usage chunk).
func BenchmarkRewriteChatChunk(b *testing.B) {
	chunks, _ := benchChunks(b)
	rw, err := New(Options{Format: OpenAIChat, PublicModel: "demo-chat", Stream: true})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := rw.Write(chunks[0], false); err != nil {
		b.Fatal(err)
	}
	chunk := chunks[3]
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rw.Write(chunk, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCopyChunk is BenchmarkRewriteChatChunk's baseline: the same chunk copied into
// a new slice.
func BenchmarkCopyChunk(b *testing.B) {
	chunks, _ := benchChunks(b)
	chunk := chunks[3]
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	var sink []byte
	for b.Loop() {
		out := make([]byte, len(chunk))
		copy(out, chunk)
		sink = out
	}
	_ = sink
}
