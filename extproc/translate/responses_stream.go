package translate

import "github.com/llmgw/gateway/extproc/sse"

// Not written yet: the stream half of the responses codec.

func (responsesCodec) newStreamDecoder() streamDecoder { return notWritten{} }

func (responsesCodec) newStreamEncoder(o ResponseOptions) streamEncoder { return notWritten{} }

var _ = sse.Event{}
