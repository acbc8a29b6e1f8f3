package response_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/response"
)

// decodeSplit feeds body to a decoder cut at i (two chunks and an empty final one when
// i is inside the body), returning the concatenated plain output.
func decodeSplit(t *testing.T, enc string, body []byte, i int) ([]byte, error) {
	t.Helper()
	d, err := response.NewDecoder(enc, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var got []byte
	for _, c := range []struct {
		b   []byte
		eos bool
	}{{body[:i], false}, {body[i:], false}, {nil, true}} {
		out, err := d.Write(c.b, c.eos)
		got = append(got, out...)
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

func TestDecoderEveryEncodingSplitAtEveryByte(t *testing.T) {
	plain := []byte(`data: {"id":"chatcmpl-1","model":"gpt-upstream","choices":[{"delta":{"content":"hello hello hello"}}]}` + "\n\n")
	for _, enc := range replay.Encodings {
		body := replay.Compress(t, enc, plain)
		for i := 0; i <= len(body); i++ {
			got, err := decodeSplit(t, replay.HeaderName(enc), body, i)
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("%s split at %d: got %q, %v", enc, i, got, err)
			}
		}
	}
}

func TestDecoderOneWholeChunkWithEnd(t *testing.T) {
	plain := []byte(`{"id":"x"}`)
	d, err := response.NewDecoder("GZIP", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Write(replay.Compress(t, "gzip", plain), true)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := d.Write(nil, true); !errors.Is(err, response.ErrClosed) {
		t.Fatalf("write after end: %v", err)
	}
}

func TestDecoderRefusesBadBodies(t *testing.T) {
	plain := bytes.Repeat([]byte("abcdefgh"), 512)
	gz := replay.Compress(t, "gzip", plain)
	cases := map[string]struct {
		body  []byte
		limit int
		want  error
	}{
		"truncated":       {gz[:len(gz)-6], 1 << 20, response.ErrUnusable},
		"trailing bytes":  {append(bytes.Clone(gz), "junk"...), 1 << 20, response.ErrUnusable},
		"not gzip":        {[]byte(`{"id":"x"}`), 1 << 20, response.ErrUnusable},
		"expands too far": {gz, 1024, response.ErrTooLarge},
	}
	for name, c := range cases {
		d, err := response.NewDecoder("gzip", c.limit)
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Write(c.body, false)
		if err == nil {
			_, err = d.Write(nil, true)
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
		d.Close()
	}
	if _, err := response.NewDecoder("compress", 1<<20); !errors.Is(err, response.ErrUnknownEncoding) {
		t.Errorf("unknown encoding: %v", err)
	}
	if _, err := response.NewDecoder("gzip, br", 1<<20); !errors.Is(err, response.ErrUnknownEncoding) {
		t.Errorf("two encodings: %v", err)
	}
}

func TestDecoderCloseWithoutEnd(t *testing.T) {
	d, err := response.NewDecoder("br", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	body := replay.Compress(t, "br", []byte("partial"))
	if _, err := d.Write(body[:2], false); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d.Close()
	if _, err := d.Write(body[2:], true); !errors.Is(err, response.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
}
