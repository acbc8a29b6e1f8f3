package openai

import (
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// SetModel rewrites the top-level "model" string of body to model in place: every other
// byte is kept.
func SetModel(body []byte, model string) ([]byte, error) {
	return sjson.SetBytes(body, "model", model)
}

// ForceIncludeUsage sets stream_options.include_usage to true, so that a streamed
// response ends with a usage chunk the gateway can bill from. A null stream_options is
// replaced by an object. Other bytes are kept.
func ForceIncludeUsage(body []byte) ([]byte, error) {
	if so := gjson.GetBytes(body, "stream_options"); so.Exists() && so.Type == gjson.Null {
		return sjson.SetRawBytes(body, "stream_options", []byte(`{"include_usage":true}`))
	}
	return sjson.SetBytes(body, "stream_options.include_usage", true)
}
