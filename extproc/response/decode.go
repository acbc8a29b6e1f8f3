package response

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// ErrUnknownEncoding: the upstream answered with a content-encoding the gateway cannot
// decode. The answer is unusable (the caller answers apierr.UpstreamError).
var ErrUnknownEncoding = errors.New("response: unknown content-encoding")

// Identity reports whether a content-encoding value means the body is not encoded.
func Identity(contentEncoding string) bool {
	e := strings.TrimSpace(strings.ToLower(contentEncoding))
	return e == "" || e == "identity"
}

// Decoder turns a content-encoded upstream body back into its plain bytes as its chunks
// arrive (extproc asks upstreams for identity, but a provider may compress anyway). It
// is push-driven: Write takes the next encoded chunk and returns every plain byte that
// chunk completes. The decompressor (a pull-style io.Reader) runs in its own goroutine,
// fed one chunk at a time; Write waits until it has consumed the chunk, so at most one
// chunk and one chunk's output are held. Close ends the goroutine; it must be called
// when a body is abandoned before its end.
type Decoder struct {
	limit    int           // most plain bytes one Write may produce
	in       chan []byte   // next encoded chunk; closed at the end of the body
	idle     chan struct{} // the decompressor consumed its input and waits for more
	done     chan error    // the decompressor ended (nil: the encoded stream is complete)
	quit     chan struct{} // Close
	out      bytes.Buffer  // plain bytes of the current Write; written by the goroutine only while Write waits
	finished bool          // the encoded stream ended
	err      error         // the decompressor's final error
	closed   bool
}

// NewDecoder starts a decoder for a content-encoding (gzip, x-gzip, br, deflate, zstd).
// limit bounds the plain bytes produced by one Write (a small body that expands beyond
// it is refused with ErrTooLarge rather than held). An unknown encoding (or a list of
// several) returns ErrUnknownEncoding.
func NewDecoder(contentEncoding string, limit int) (*Decoder, error) {
	var open func(io.Reader) (io.Reader, func(), error)
	switch strings.TrimSpace(strings.ToLower(contentEncoding)) {
	case "gzip", "x-gzip":
		open = func(r io.Reader) (io.Reader, func(), error) {
			z, err := gzip.NewReader(r)
			if err != nil {
				return nil, nil, err
			}
			// One member: a body is one gzip stream; bytes after it are an error.
			z.Multistream(false)
			return z, func() {}, nil
		}
	case "br":
		open = func(r io.Reader) (io.Reader, func(), error) { return brotli.NewReader(r), func() {}, nil }
	case "zstd":
		open = func(r io.Reader) (io.Reader, func(), error) {
			z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
			if err != nil {
				return nil, nil, err
			}
			return z, z.Close, nil
		}
	case "deflate":
		// HTTP's deflate is the zlib format (RFC 9110 section 8.4.1.2); some servers
		// send raw deflate instead, told apart by the zlib header check.
		open = func(r io.Reader) (io.Reader, func(), error) {
			br := bufio.NewReader(r)
			h, err := br.Peek(2)
			if err != nil {
				return nil, nil, err
			}
			if h[0]&0x0f == 8 && (uint(h[0])<<8|uint(h[1]))%31 == 0 {
				z, err := zlib.NewReader(br)
				if err != nil {
					return nil, nil, err
				}
				return z, func() {}, nil
			}
			return flate.NewReader(br), func() {}, nil
		}
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownEncoding, contentEncoding)
	}
	d := &Decoder{
		limit: limit,
		in:    make(chan []byte),
		idle:  make(chan struct{}),
		done:  make(chan error, 1),
		quit:  make(chan struct{}),
	}
	go d.run(open)
	// The decompressor's first read asks for input (or it already failed).
	select {
	case <-d.idle:
	case err := <-d.done:
		d.finished, d.err = true, err
	}
	return d, nil
}

var errDecoderClosed = errors.New("response: decoder closed")

func (d *Decoder) run(open func(io.Reader) (io.Reader, func(), error)) {
	feed := &feedReader{d: d}
	zr, closeFn, err := open(feed)
	if err == nil {
		_, err = io.Copy(limitWriter{d}, zr)
		closeFn()
		if err == nil && (len(feed.buf) > 0 || !feed.eof && feed.more()) {
			err = errors.New("data after the end of the encoded body")
		}
	}
	d.done <- err
}

// feedReader hands the decompressor the chunks Write sends.
type feedReader struct {
	d   *Decoder
	buf []byte
	eof bool
}

func (f *feedReader) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		if f.eof {
			return 0, io.EOF
		}
		select {
		case f.d.idle <- struct{}{}:
		case <-f.d.quit:
			return 0, errDecoderClosed
		}
		select {
		case c, ok := <-f.d.in:
			if !ok {
				f.eof = true
			}
			f.buf = c
		case <-f.d.quit:
			return 0, errDecoderClosed
		}
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

// ReadByte makes feedReader a flate.Reader: gzip and zlib then read no byte past their
// end, so bytes after the encoded body are seen (and refused).
func (f *feedReader) ReadByte() (byte, error) {
	var b [1]byte
	if _, err := f.Read(b[:]); err != nil {
		return 0, err
	}
	return b[0], nil
}

// more reports, after the decompressor ended, whether non-empty input still follows.
func (f *feedReader) more() bool {
	for !f.eof && len(f.buf) == 0 {
		if _, err := f.Read(nil); err != nil {
			return false
		}
	}
	return len(f.buf) > 0
}

type limitWriter struct{ d *Decoder }

func (w limitWriter) Write(p []byte) (int, error) {
	if w.d.out.Len()+len(p) > w.d.limit {
		return 0, ErrTooLarge
	}
	return w.d.out.Write(p)
}

// Write decodes the next encoded chunk. endOfStream says it is the last: the encoded
// body must then be complete. Errors wrap ErrUnusable (corrupt or truncated encoding)
// or are ErrTooLarge.
func (d *Decoder) Write(chunk []byte, endOfStream bool) ([]byte, error) {
	if d.closed {
		return nil, ErrClosed
	}
	if !d.finished {
		d.in <- chunk
		if endOfStream {
			close(d.in)
		}
	wait:
		for !d.finished {
			select {
			case <-d.idle:
				// Without the end, the decompressor took the chunk and wants the next.
				// After close it will see the end and never ask again.
				if !endOfStream {
					break wait
				}
			case err := <-d.done:
				d.finished, d.err = true, err
			}
		}
	} else if len(chunk) > 0 && d.err == nil {
		d.err = errors.New("data after the end of the encoded body")
	}
	out := bytes.Clone(d.out.Bytes())
	d.out.Reset()
	if d.finished && d.err != nil {
		err := d.err
		d.Close()
		if errors.Is(err, ErrTooLarge) {
			return out, ErrTooLarge
		}
		return out, fmt.Errorf("%w: content-encoding: %v", ErrUnusable, err)
	}
	if endOfStream {
		d.Close()
	}
	return out, nil
}

// Close ends the decoder's goroutine. Safe to call more than once.
func (d *Decoder) Close() {
	if d.closed {
		return
	}
	d.closed = true
	close(d.quit)
}
