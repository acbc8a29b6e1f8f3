package front

import (
	"io"
	"sync"
)

// heldBody reads a response body while Envoy awaits the response-headers reply: the
// data that arrives meanwhile is held (up to limit, Envoy's watermark) so that, once the
// reply came, the front knows whether the whole body is already there. It is then read
// on like the body itself.
type heldBody struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	err    error // how the source ended (io.EOF when complete)
	closed bool
	limit  int
}

// holdBody starts reading src; ended (may be nil) is called once src reached its end.
func holdBody(src io.Reader, limit int, ended func()) *heldBody {
	hb := &heldBody{limit: limit}
	hb.cond = sync.NewCond(&hb.mu)
	go hb.fill(src, ended)
	return hb
}

func (hb *heldBody) fill(src io.Reader, ended func()) {
	rb := getReadBuf()
	defer putReadBuf(rb)
	p := rb[:]
	for {
		hb.mu.Lock()
		for len(hb.buf) >= hb.limit && !hb.closed {
			hb.cond.Wait()
		}
		closed := hb.closed
		hb.mu.Unlock()
		if closed {
			return
		}
		n, err := src.Read(p)
		hb.mu.Lock()
		hb.buf = append(hb.buf, p[:n]...)
		if err != nil {
			hb.err = err
		}
		hb.cond.Broadcast()
		hb.mu.Unlock()
		if err != nil {
			if err == io.EOF && ended != nil {
				ended()
			}
			return
		}
	}
}

// Read returns held data, waiting for some or for the end of the source.
func (hb *heldBody) Read(p []byte) (int, error) {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	for len(hb.buf) == 0 && hb.err == nil && !hb.closed {
		hb.cond.Wait()
	}
	switch {
	case len(hb.buf) > 0:
		n := copy(p, hb.buf)
		hb.buf = hb.buf[n:]
		hb.cond.Broadcast()
		return n, nil
	case hb.closed:
		return 0, io.ErrClosedPipe
	}
	return 0, hb.err
}

// take returns everything held so far, without waiting, and whether it is the whole
// body (the source ended cleanly).
func (hb *heldBody) take() (data []byte, whole bool) {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	data, hb.buf = hb.buf, nil
	hb.cond.Broadcast()
	return data, hb.err == io.EOF
}

// close stops the reading; the source itself is closed by its owner.
func (hb *heldBody) close() {
	hb.mu.Lock()
	hb.closed = true
	hb.cond.Broadcast()
	hb.mu.Unlock()
}
