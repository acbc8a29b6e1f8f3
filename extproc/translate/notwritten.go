package translate

import (
	"errors"

	"github.com/llmgw/gateway/extproc/sse"
)

// errNotWritten is returned by the codec halves not written yet; this file goes when
// the last of them is.
var errNotWritten = errors.New("translate: not written yet")

type notWritten struct{}

func (notWritten) decode(*sse.Event, func(Event)) error { return errNotWritten }

func (notWritten) encode([]byte, Event) ([]byte, error) { return nil, errNotWritten }

var _ = unsupported // used by the request codecs
