package translate

import "github.com/llmgw/gateway/extproc/sse"

// Not written yet: the stream half of the messages codec.

func (messagesCodec) newStreamDecoder() streamDecoder { return notWritten{} }

func (messagesCodec) newStreamEncoder(o ResponseOptions) streamEncoder { return notWritten{} }

var _ = sse.Event{}
