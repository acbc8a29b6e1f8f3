package response

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// framed is everything a stream's Writes produced.
type framed struct {
	Out                 string
	Err                 string
	Usage               Usage
	UsageOK             bool
	Delivered           Usage
	Upstream, Collected string
}

// feedFramed runs chunks through a new chat Rewriter (the last with endOfStream, unless
// broken), stopping at the first error, with or without dataEvents.
func feedFramed(t testing.TB, opts Options, fast, broken bool, chunks ...[]byte) framed {
	t.Helper()
	defer func(was bool) { frameDataEvents = was }(frameDataEvents)
	frameDataEvents = fast
	var f framed
	opts.CountTokens = func(s string) int { f.Collected += s; return len(s) }
	rw, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range chunks {
		out, err := rw.Write(c, i == len(chunks)-1 && !broken)
		f.Out += string(out)
		if err != nil {
			f.Err = err.Error()
			break
		}
	}
	f.Usage, f.UsageOK = rw.Usage()
	f.Delivered = rw.Delivered()
	f.Upstream = rw.UpstreamModel()
	return f
}

// TestDataEventsLikeTheDecoder: streams made of plain data events and of everything
// dataEvents leaves to the decoder (other fields, comments, "\r\n" and "\r" line ends,
// [DONE], blank lines, events split across chunks, events over the size limit, a
// truncated tail, an empty end-of-stream chunk) give the same output, usage, counted text,
// upstream model and errors with and without it, whole and split at every byte.
func TestDataEventsLikeTheDecoder(t *testing.T) {
	const (
		c1 = `{"id":"a","model":"up","choices":[{"index":0,"delta":{"content":"x\"y"}}],"usage":null}`
		c2 = `{"id":"a","model":"up","choices":[{"index":0,"delta":{"content":"\u00e9"}}],"usage":null}`
		c3 = `{"id":"b","model":"up2","choices":[{"index":0,"delta":{"content":"z"}}],"usage":null}`
		cu = `{"id":"a","model":"up","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`
	)
	streams := map[string]string{
		"plain":                 "data: " + c1 + "\n\ndata: " + c2 + "\n\ndata: " + cu + "\n\ndata: [DONE]\n\n",
		"no space after colon":  "data:" + c1 + "\n\ndata:" + c2 + "\n\n",
		"two spaces":            "data:  " + c1 + "\n\n",
		"another head":          "data: " + c1 + "\n\ndata: " + c3 + "\n\ndata: " + c2 + "\n\n",
		"no usage chunk":        "data: " + c1 + "\n\ndata: [DONE]\n\n",
		"crlf":                  "data: " + c1 + "\r\n\r\ndata: " + c2 + "\r\n\r\n",
		"cr":                    "data: " + c1 + "\r\rdata: " + c2 + "\r\r",
		"lf then crlf":          "data: " + c1 + "\n\ndata: " + c2 + "\r\n\r\ndata: " + cu + "\n\n",
		"cr inside a line":      "data: " + c1 + "\n\ndata: {\"a\":\r1}\n\ndata: " + c2 + "\n\n",
		"comment and event":     ": hi\n\ndata: " + c1 + "\n\nevent: x\ndata: " + c2 + "\n\nid: 7\ndata: " + cu + "\n\n",
		"fields after data":     "data: " + c1 + "\nid: 1\n\ndata: " + c2 + "\n\n",
		"two data lines":        "data: " + c1 + "\ndata: " + c2 + "\n\ndata: " + cu + "\n\n",
		"blank lines":           "\n\ndata: " + c1 + "\n\n\n\ndata: " + c2 + "\n\n",
		"empty data":            "data:\n\ndata: \n\ndata: " + c1 + "\n\n",
		"not json":              "data: hello\n\ndata: {\"model\":\"up\"\n\ndata: " + c2 + "\n\n",
		"data without colon":    "data\n\ndata: " + c1 + "\n\n",
		"truncated tail":        "data: " + c1 + "\n\ndata: " + c2,
		"tail without blank":    "data: " + c1 + "\n\ndata: " + c2 + "\n",
		"done only":             "data: [DONE]\n\n",
		"escaped strings":       "data: {\"model\":\"u\\\"p\",\"choices\":[{\"delta\":{\"content\":\"\\\\n\\\"\"}}]}\n\n",
		"usage then more":       "data: " + cu + "\n\ndata: " + c1 + "\n\n",
		"nothing but a comment": ": ping\n\n",
	}
	for name, in := range streams {
		for _, wants := range []bool{false, true} {
			opts := Options{Format: OpenAIChat, PublicModel: "pub", Stream: true, ClientWantsUsage: wants}
			for _, chunks := range chunkings([]byte(in)) {
				for _, broken := range []bool{false, true} {
					want := feedFramed(t, opts, false, broken, chunks...)
					got := feedFramed(t, opts, true, broken, chunks...)
					if d := cmp.Diff(want, got); d != "" {
						t.Fatalf("%s (client wants usage %v, broken %v), %d chunks (first %d bytes): -decoder +dataEvents\n%s",
							name, wants, broken, len(chunks), len(chunks[0]), d)
					}
				}
			}
		}
	}
}

// TestDataEventsSizeLimit: an event over the limit fails as it does in the decoder, after
// the events before it; one at the limit passes.
func TestDataEventsSizeLimit(t *testing.T) {
	small := "data: {\"model\":\"u\",\"choices\":[]}\n\n"
	for _, size := range []int{len(small) - 1, len(small), len(small) + 1} {
		opts := Options{Format: OpenAIChat, PublicModel: "p", Stream: true, MaxEventSize: size}
		in := []byte(small + small + strings.Repeat(small, 2))
		for _, chunks := range chunkings(in) {
			want := feedFramed(t, opts, false, false, chunks...)
			got := feedFramed(t, opts, true, false, chunks...)
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("limit %d, %d chunks: -decoder +dataEvents\n%s", size, len(chunks), d)
			}
		}
		got := feedFramed(t, opts, true, false, in)
		if tooLarge := got.Err == ErrTooLarge.Error(); tooLarge != (size < len(small)) {
			t.Fatalf("limit %d: error %q", size, got.Err)
		}
	}
}

// FuzzDataEvents compares Write with and without dataEvents on any bytes, cut in two
// chunks and then an empty end-of-stream chunk, for both usage settings.
func FuzzDataEvents(f *testing.F) {
	f.Add([]byte("data: {\"model\":\"u\",\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}\n\ndata: [DONE]\n\n"), 30, 0)
	f.Add([]byte("data:{}\r\n\r\ndata: x\n\n: c\n\nevent: e\ndata: {\"model\":1}\n\n"), 7, 64)
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\ndata: {\"choices\":[{\"delta\":"), 60, 40)
	f.Fuzz(func(t *testing.T, in []byte, cut, max int) {
		if cut < 0 || cut > len(in) {
			cut = len(in) / 2
		}
		if max < 0 || max > 1<<12 {
			max = 0
		}
		for _, wants := range []bool{false, true} {
			opts := Options{Format: OpenAIChat, PublicModel: "p", Stream: true, ClientWantsUsage: wants, MaxEventSize: max}
			for _, broken := range []bool{false, true} {
				want := feedFramed(t, opts, false, broken, in[:cut], in[cut:], nil)
				got := feedFramed(t, opts, true, broken, in[:cut], in[cut:], nil)
				if d := cmp.Diff(want, got); d != "" {
					t.Fatalf("%q cut at %d (limit %d): -decoder +dataEvents\n%s", in, cut, max, d)
				}
			}
		}
	})
}

// TestDecoderOnlyWhenNeeded: a stream whose chunks end at event boundaries never makes
// the decoder; a chunk ending inside an event does, and the event is completed.
func TestDecoderOnlyWhenNeeded(t *testing.T) {
	ev := "data: {\"model\":\"u\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"
	rw, err := New(Options{Format: OpenAIChat, PublicModel: "p", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	r := rw.(*streamRewriter)
	var out []byte
	for _, c := range []string{ev, ev + ev, ""} {
		b, err := rw.Write([]byte(c), false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	if r.dec != nil {
		t.Fatal("decoder made for whole events")
	}
	for _, c := range []string{ev + ev[:10], ev[10:]} {
		b, err := rw.Write([]byte(c), false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	if b, err := rw.Write(nil, true); err != nil || len(b) != 0 {
		t.Fatalf("end of stream: %q, %v", b, err)
	}
	want := strings.Repeat(strings.Replace(ev, `"u"`, `"p"`, 1), 5)
	if r.dec == nil || string(out) != want {
		t.Fatalf("decoder %v, got %q", r.dec != nil, out)
	}
}
