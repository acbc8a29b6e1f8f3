package replay

import (
	"bytes"
	"io"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// Encodings are the content-encodings a provider may answer in although asked for
// identity ("raw-deflate" is deflate without its zlib wrapper, which some servers send
// as "deflate").
var Encodings = []string{"gzip", "br", "deflate", "raw-deflate", "zstd"}

// Compress encodes plain in one of Encodings, as a provider would.
func Compress(t testing.TB, enc string, plain []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	var w io.WriteCloser
	var err error
	switch enc {
	case "gzip":
		w = gzip.NewWriter(&b)
	case "br":
		w = brotli.NewWriter(&b)
	case "deflate":
		w = zlib.NewWriter(&b)
	case "raw-deflate":
		w, err = flate.NewWriter(&b, flate.DefaultCompression)
	case "zstd":
		w, err = zstd.NewWriter(&b)
	default:
		t.Fatalf("no encoder for %q", enc)
	}
	if err == nil {
		_, err = w.Write(plain)
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// HeaderName is the content-encoding header value of one of Encodings.
func HeaderName(enc string) string {
	if enc == "raw-deflate" {
		return "deflate"
	}
	return enc
}
