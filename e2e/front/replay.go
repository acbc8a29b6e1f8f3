package front

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// replayBody keeps a request body for retries, as the router buffers the request it
// may have to send again (router.cc Filter::decodeData): each attempt reads what was
// kept, then the rest of the downstream body. Past the buffer limit (the listener's
// per_connection_buffer_limit_bytes; a route's per_request_buffer_limit_bytes is not
// emulated) the router gives up on retrying: nothing more is kept, and overflowed
// reports it. Envoy answers 507 when that happens while a retry waits for its back-off;
// the front reads the body only during an attempt, so that case does not arise.
type replayBody struct {
	mu    sync.Mutex
	src   io.Reader
	kept  []byte
	limit int64
	over  bool
	eof   bool
	// whole: kept is the whole body, read before the first attempt (kept never changes).
	whole bool
	err   error
	// current is the attempt's reader; an earlier attempt's reader is detached.
	current *replayReader
}

func newReplayBody(src io.Reader, limit int64) *replayBody {
	b := &replayBody{src: src, limit: limit}
	if br, ok := src.(*bytes.Reader); ok && int64(br.Len()) <= limit {
		// The front holds this body whole already (buffered for ext_proc, or replaced by
		// it), within the limit: every attempt sends all of it.
		b.kept = make([]byte, br.Len())
		_, _ = br.Read(b.kept)
		b.whole, b.eof = true, true
	}
	return b
}

// reader returns a reader for a new attempt; the previous attempt's reader fails from
// now on (its transport may still be writing). An attempt of a body held whole gets its
// own in-memory reader: nothing is shared to protect, and net/http then writes the
// request's headers and body together (as Envoy's codec does) rather than flushing the
// headers first, as it does for a body it cannot tell is in memory.
func (b *replayBody) reader() io.ReadCloser {
	if b.whole {
		return io.NopCloser(bytes.NewReader(b.kept))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := &replayReader{b: b}
	b.current = r
	return r
}

func (b *replayBody) overflowed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.over
}

type replayReader struct {
	b   *replayBody
	off int
}

var errDetached = errors.New("request body of an abandoned attempt")

func (r *replayReader) Read(p []byte) (int, error) {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current != r {
		return 0, errDetached
	}
	if r.off < len(b.kept) {
		n := copy(p, b.kept[r.off:])
		r.off += n
		return n, nil
	}
	if b.eof {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.over && r.off != len(b.kept) {
		return 0, errDetached
	}
	n, err := b.src.Read(p)
	if n > 0 && !b.over {
		if int64(len(b.kept)+n) > b.limit {
			b.over = true
		} else {
			b.kept = append(b.kept, p[:n]...)
			r.off += n
		}
	}
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.err = err
	}
	return n, err
}

// Close leaves the downstream body open: a later attempt may read on.
func (r *replayReader) Close() error { return nil }
