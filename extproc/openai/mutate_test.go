package openai

import (
	"testing"

	"github.com/llmgw/gateway/extproc/wire"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// sjsonIncludeUsage is ForceIncludeUsage as it was written with sjson: the oracle.
func sjsonIncludeUsage(body []byte) ([]byte, error) {
	if so := gjson.GetBytes(body, "stream_options"); so.Exists() && so.Type == gjson.Null {
		return sjson.SetRawBytes(body, "stream_options", []byte(`{"include_usage":true}`))
	}
	return sjson.SetBytes(body, "stream_options.include_usage", true)
}

func TestIncludeUsage(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream_options":null,"messages":[]}`,
		`{"model":"m","stream_options":{},"messages":[]}`,
		`{"model":"m","stream_options":{"include_usage":false},"messages":[]}`,
		`{"model":"m","stream_options":{"include_usage":true}}`,
		`{"model":"m","stream_options":{"x":1}}`,
		`{"stream_options" : { "x" : [1, {"include_usage":false}] } , "model":"m"}`,
		`{"model":"m","stream_options":5}`,
		`{"model":"m","stream_options":"s"}`,
		`{}`,
		`{"model":"m","messages":[{"content":"a \"stream_options\": null"}]}`,
	} {
		got, ok := wire.SetMembers([]byte(body), IncludeUsage)
		want, werr := sjsonIncludeUsage([]byte(body))
		if !ok || werr != nil || string(got) != string(want) {
			t.Errorf("%s:\n got %s (%v)\nwant %s (%v)", body, got, ok, want, werr)
		}
		if !gjson.GetBytes(got, "stream_options.include_usage").Bool() {
			t.Errorf("%s: include_usage not set: %s", body, got)
		}
	}
	if _, ok := wire.SetMembers([]byte(`["not an object"]`), IncludeUsage); ok {
		t.Error("an array was rewritten")
	}
}
