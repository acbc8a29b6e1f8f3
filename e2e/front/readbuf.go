package front

import "sync"

// readBufSize is the size of the front's reads of a body it passes on (one read, then
// what it got is sent on).
const readBufSize = 32 * 1024

// readBufs are reused read buffers: a request's body reads would otherwise allocate
// (and clear) one each.
var readBufs = sync.Pool{New: func() any { return new([readBufSize]byte) }}

// getReadBuf returns a buffer for reads; putReadBuf gives it back once nothing refers
// to it.
func getReadBuf() *[readBufSize]byte  { return readBufs.Get().(*[readBufSize]byte) }
func putReadBuf(b *[readBufSize]byte) { readBufs.Put(b) }
