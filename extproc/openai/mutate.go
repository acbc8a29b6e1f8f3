package openai

import "github.com/llmgw/gateway/extproc/wire"

// IncludeUsage sets stream_options.include_usage to true, so that a streamed response
// ends with a usage chunk the gateway can bill from. A stream_options that is not an
// object (null) is replaced by one; in one that is, only include_usage is set.
var IncludeUsage = wire.Set{Name: "stream_options", Value: func(old []byte) ([]byte, bool) {
	if len(old) > 0 && old[0] == '{' {
		return wire.SetMember(old, "include_usage", []byte("true"))
	}
	return []byte(`{"include_usage":true}`), true
}}
