package translate

import (
	"fmt"

	"github.com/llmgw/gateway/extproc/sse"
)

// maxNativeBody bounds a complete upstream-only answer held until its end, as the
// response rewriter bounds the bodies it holds.
const maxNativeBody = 16 << 20

// Normalizer turns the answer of an upstream-only API (Native) into the bytes of the API
// it reads as (Reads): the lifecycle's response rewriter then reads its usage and model
// id as it reads every other answer's. Not safe for concurrent use.
type Normalizer struct {
	stream *Stream // nil for a complete answer
	dec    upstreamHalves
	enc    codec
	o      ResponseOptions
	body   []byte
}

// NewNormalizer returns the normalizer of one answer of an upstream speaking api, a
// stream or not; nil when api's answers need none (Native false).
func NewNormalizer(api API, stream bool, o ResponseOptions) *Normalizer {
	u, ok := upstreamOnly[api]
	if !ok || !u.native {
		return nil
	}
	n := &Normalizer{dec: u.codec, enc: codecs[u.reads], o: o}
	if stream {
		var in framing = sse.NewDecoder(0)
		if u.framing != nil {
			in = u.framing()
		}
		n.stream = &Stream{in: in, dec: u.codec.newStreamDecoder(), enc: n.enc.newStreamEncoder(o)}
	}
	return n
}

// Write feeds the next upstream chunk (endOfStream on the last) and returns the
// normalized bytes it completes: events as they come, a complete answer at its end.
func (n *Normalizer) Write(chunk []byte, endOfStream bool) ([]byte, error) {
	if n.stream != nil {
		return n.stream.Write(chunk, endOfStream)
	}
	if len(n.body)+len(chunk) > maxNativeBody {
		return nil, fmt.Errorf("%w: answer larger than %d bytes", ErrMalformed, maxNativeBody)
	}
	n.body = append(n.body, chunk...)
	if !endOfStream {
		return nil, nil
	}
	r, err := n.dec.decodeResponse(n.body)
	if err != nil {
		return nil, err
	}
	return n.enc.encodeResponse(r, n.o)
}
