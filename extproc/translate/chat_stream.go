package translate

import "github.com/llmgw/gateway/extproc/sse"

// Not written yet: the stream half of the chat codec.

func (chatCodec) newStreamDecoder() streamDecoder { return notWritten{} }

func (chatCodec) newStreamEncoder(o ResponseOptions) streamEncoder { return notWritten{} }

var _ = sse.Event{}
