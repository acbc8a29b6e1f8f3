package sse

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// got is an Event copied out of the decoder's memory, for comparison.
type got struct {
	Raw, Name, ID, Data, Retry string
	HasName, HasID             bool
	DataLines                  int
	Incomplete                 bool
}

func snapshot(e *Event) got {
	return got{
		Raw: string(e.Raw), Name: string(e.Name), HasName: e.Name != nil, ID: string(e.ID),
		HasID: e.HasID, Data: string(e.Data), DataLines: e.DataLines, Retry: string(e.Retry),
		Incomplete: e.Incomplete,
	}
}

// decodeChunks decodes chunks in order, then finishes the stream.
func decodeChunks(t testing.TB, max int, chunks ...[]byte) ([]got, error) {
	t.Helper()
	d := NewDecoder(max)
	var out []got
	emit := func(e *Event) error {
		out = append(out, snapshot(e))
		return nil
	}
	for _, c := range chunks {
		if err := d.Feed(c, emit); err != nil {
			return out, err
		}
	}
	return out, d.Finish(emit)
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []got
	}{
		{
			name: "openai data events",
			in:   "data: {\"a\":1}\n\ndata: [DONE]\n\n",
			want: []got{
				{Raw: "data: {\"a\":1}\n\n", Data: `{"a":1}`, DataLines: 1},
				{Raw: "data: [DONE]\n\n", Data: "[DONE]", DataLines: 1},
			},
		},
		{
			name: "named event with crlf",
			in:   "event: ping\r\ndata: {}\r\n\r\n",
			want: []got{{Raw: "event: ping\r\ndata: {}\r\n\r\n", Name: "ping", HasName: true, Data: "{}", DataLines: 1}},
		},
		{
			name: "cr line ends, the last blank line at the end of the stream",
			in:   "data: a\r\rdata: b\r\r",
			want: []got{
				{Raw: "data: a\r\r", Data: "a", DataLines: 1},
				{Raw: "data: b\r\r", Data: "b", DataLines: 1},
			},
		},
		{
			name: "multi-line data, comment, id, retry, no space after colon",
			in:   ": hello\nid:7\nretry: 1500\ndata:line1\ndata\ndata:  two spaces\n\n",
			want: []got{{
				Raw: ": hello\nid:7\nretry: 1500\ndata:line1\ndata\ndata:  two spaces\n\n",
				ID:  "7", HasID: true, Retry: "1500", Data: "line1\n\n two spaces", DataLines: 3,
			}},
		},
		{
			name: "blank lines and comment-only blocks are handed out without fields",
			in:   "\n: keep-alive\n\n\ndata: x\n\n",
			want: []got{
				{Raw: "\n"},
				{Raw: ": keep-alive\n\n"},
				{Raw: "\n"},
				{Raw: "data: x\n\n", Data: "x", DataLines: 1},
			},
		},
		{
			name: "id with NUL ignored, bad retry ignored, unknown field ignored",
			in:   "id: a\x00b\nretry: 10s\nfoo: bar\ndata: y\n\n",
			want: []got{{Raw: "id: a\x00b\nretry: 10s\nfoo: bar\ndata: y\n\n", Data: "y", DataLines: 1}},
		},
		{
			name: "incomplete last event",
			in:   "data: a\n\ndata: {\"cut",
			want: []got{
				{Raw: "data: a\n\n", Data: "a", DataLines: 1},
				{Raw: "data: {\"cut", Data: "{\"cut", DataLines: 1, Incomplete: true},
			},
		},
		{
			name: "empty event name",
			in:   "event:\ndata: z\n\n",
			want: []got{{Raw: "event:\ndata: z\n\n", HasName: true, Data: "z", DataLines: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, chunks := range splits([]byte(tt.in)) {
				out, err := decodeChunks(t, 0, chunks...)
				if err != nil {
					t.Fatalf("chunks %q: %v", chunks, err)
				}
				if diff := cmp.Diff(tt.want, out); diff != "" {
					t.Fatalf("chunks %q: events (-want +got):\n%s", chunks, diff)
				}
			}
		})
	}
}

// splits returns the input as one chunk, split in two at every offset, and one byte at a
// time.
func splits(in []byte) [][][]byte {
	out := [][][]byte{{in}}
	for k := 0; k <= len(in); k++ {
		out = append(out, [][]byte{in[:k], in[k:]})
	}
	var bytewise [][]byte
	for i := range in {
		bytewise = append(bytewise, in[i:i+1])
	}
	return append(out, bytewise)
}

func TestDecoderEventTooLarge(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		max     int
		wantErr bool
	}{
		{name: "at the limit", in: "data: 12\n\n", max: 10},
		{name: "one over, terminated", in: "data: 123\n\n", max: 10, wantErr: true},
		{name: "one over, never terminated", in: "data: 123456789", max: 10, wantErr: true},
		{name: "small events under a small limit", in: strings.Repeat("data: 1\n\n", 50), max: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, chunks := range splits([]byte(tt.in)) {
				_, err := decodeChunks(t, tt.max, chunks...)
				if tt.wantErr != errors.Is(err, ErrEventTooLarge) {
					t.Fatalf("chunks %q: err = %v, want too large: %v", chunks, err, tt.wantErr)
				}
			}
		})
	}
}

func TestDecoderBoundedMemory(t *testing.T) {
	// A long stream of small events fed in small chunks keeps only a partial event.
	d := NewDecoder(64)
	ev := []byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n")
	n := 0
	for i := 0; i < 10000; i++ {
		for j := 0; j < len(ev); j += 7 {
			err := d.Feed(ev[j:min(j+7, len(ev))], func(*Event) error { n++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if d.Buffered() > 64 {
				t.Fatalf("buffered %d bytes", d.Buffered())
			}
		}
	}
	if n != 10000 {
		t.Fatalf("%d events, want 10000", n)
	}
	if cap(d.pending) > 128 {
		t.Fatalf("pending buffer grew to %d", cap(d.pending))
	}
}

func TestEmitErrorStops(t *testing.T) {
	d := NewDecoder(0)
	stop := errors.New("stop")
	calls := 0
	err := d.Feed([]byte("data: 1\n\ndata: 2\n\n"), func(*Event) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("err %v after %d calls, want stop after 1", err, calls)
	}
}

func TestAppendWithData(t *testing.T) {
	tests := []struct {
		name, in, data, want string
	}{
		{name: "single data line keeps everything else", in: "event: x\nid: 1\ndata:{\"a\":1}\r\n: c\n\n", data: `{"a":2}`, want: "event: x\nid: 1\ndata:{\"a\":2}\r\n: c\n\n"},
		{name: "multi-line data is re-encoded", in: "event: x\ndata: a\ndata: b\n\n", data: "c", want: "event: x\ndata: c\n\n"},
		{name: "new data with a line break is re-encoded", in: "data: a\n\n", data: "b\nc", want: "data: b\ndata: c\n\n"},
		{name: "incomplete event keeps its missing terminator", in: "data: a", data: "b", want: "data: b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(0)
			var out []byte
			emit := func(e *Event) error {
				out = e.AppendWithData(out, []byte(tt.data))
				return nil
			}
			if err := d.Feed([]byte(tt.in), emit); err != nil {
				t.Fatal(err)
			}
			if err := d.Finish(emit); err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Fatalf("got %q, want %q", out, tt.want)
			}
		})
	}
}

func TestAppendEncodedRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{name: "data only", ev: Event{Data: []byte(`{"x":1}`), DataLines: 1}, want: "data: {\"x\":1}\n\n"},
		{name: "named with id and multi-line data", ev: Event{Name: []byte("error"), ID: []byte("9"), HasID: true, Data: []byte("a\nb"), DataLines: 2}, want: "event: error\nid: 9\ndata: a\ndata: b\n\n"},
		{name: "retry only", ev: Event{Retry: []byte("100")}, want: "retry: 100\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := tt.ev.AppendEncoded(nil)
			if string(enc) != tt.want {
				t.Fatalf("encoded %q, want %q", enc, tt.want)
			}
			out, err := decodeChunks(t, 0, enc)
			if err != nil || len(out) != 1 {
				t.Fatalf("decoded %v, %v", out, err)
			}
			if out[0].Data != string(tt.ev.Data) || out[0].Name != string(tt.ev.Name) || out[0].ID != string(tt.ev.ID) {
				t.Fatalf("round trip %+v from %+v", out[0], tt.ev)
			}
		})
	}
}

func FuzzDecoder(f *testing.F) {
	f.Add([]byte("event: a\r\ndata: 1\r\n\r\ndata: 2\r\rid: x\n\n"), 3, 9)
	f.Add([]byte("data: {\"model\":\"m\"}\n\n: c\n\ndata: [DONE]\n\n"), 1, 20)
	f.Add([]byte("\r\n\r\r\n\n\r"), 1, 2)
	f.Fuzz(func(t *testing.T, in []byte, a, b int) {
		if len(in) > 4096 {
			return
		}
		want, wantErr := decodeChunks(t, 256, in)
		var joined bytes.Buffer
		for _, e := range want {
			joined.WriteString(e.Raw)
		}
		if wantErr == nil && !bytes.Equal(joined.Bytes(), in) {
			t.Fatalf("raw bytes %q do not add up to the input %q", joined.Bytes(), in)
		}
		// Any split into three chunks and a byte-at-a-time feed give the same events.
		i, j := clamp(a, len(in)), clamp(b, len(in))
		if i > j {
			i, j = j, i
		}
		for _, chunks := range [][][]byte{{in[:i], in[i:j], in[j:]}, splits(in)[len(in)+2]} {
			got, err := decodeChunks(t, 256, chunks...)
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("split %d,%d: err %v, one chunk: %v", i, j, err, wantErr)
			}
			if wantErr == nil {
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("split %s: (-one chunk +split):\n%s", fmt.Sprint(i, j), diff)
				}
			}
		}
	})
}

func clamp(n, l int) int {
	if n < 0 {
		n = -n
	}
	if l == 0 {
		return 0
	}
	return n % (l + 1)
}
