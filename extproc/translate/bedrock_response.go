package translate

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/tidwall/gjson"
)

// The bedrock codec's response half: a Converse answer.

func (bedrockCodec) decodeResponse(body []byte) (*Response, error) {
	if !gjson.ValidBytes(body) {
		return nil, fmt.Errorf("%w: Converse answer is not JSON", ErrMalformed)
	}
	root := gjson.ParseBytes(body)
	msg := root.Get("output.message")
	if !msg.Exists() {
		return nil, fmt.Errorf("%w: no output message", ErrMalformed)
	}
	r := &Response{ID: bedrockID(), Usage: bedrockUsage(root.Get("usage")),
		Finish:       bedrockFinish(root.Get("stopReason").Str),
		StopSequence: root.Get("additionalModelResponseFields.stop_sequence").Str}
	msg.Get("content").ForEach(func(_, b gjson.Result) bool {
		switch {
		case b.Get("text").Exists():
			r.Content = append(r.Content, Part{Kind: PartText, Text: b.Get("text").Str})
		case b.Get("toolUse").Exists():
			u := b.Get("toolUse")
			args := u.Get("input").Raw
			if args == "" {
				args = "{}"
			}
			r.Content = append(r.Content, Part{Kind: PartToolCall, ToolCall: &ToolCall{
				ID: u.Get("toolUseId").Str, Name: u.Get("name").Str, Arguments: args}})
		}
		return true
	})
	return r, nil
}

// bedrockID names an answer: Converse gives none in its body (only the request id in a
// header the gateway does not forward), and every client API wants one.
func bedrockID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "msg_bdrk_" + hex.EncodeToString(b[:])
}
