package openai

import (
	"errors"

	"github.com/llmgw/gateway/extproc/wire"
)

// ForceIncludeUsage sets stream_options.include_usage to true, so that a streamed
// response ends with a usage chunk the gateway can bill from. A stream_options that is
// not an object (null) is replaced by one. Other bytes are kept.
func ForceIncludeUsage(body []byte) ([]byte, error) {
	so, found, ok := wire.Member(body, "stream_options")
	if ok && found && len(so) > 0 && so[0] == '{' {
		if so, ok = wire.SetMember(so, "include_usage", []byte("true")); ok {
			body, ok = wire.SetMember(body, "stream_options", so)
		}
	} else if ok {
		body, ok = wire.SetMember(body, "stream_options", []byte(`{"include_usage":true}`))
	}
	if !ok {
		return nil, errors.New("openai: the body is not a JSON object")
	}
	return body, nil
}
