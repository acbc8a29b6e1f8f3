package translate

import (
	"fmt"

	"github.com/tidwall/gjson"
)

// The messages codec's response half: a complete Anthropic message.

func (messagesCodec) decodeResponse(body []byte) (*Response, error) {
	if !gjson.ValidBytes(body) {
		return nil, fmt.Errorf("%w: message is not JSON", ErrMalformed)
	}
	root := gjson.ParseBytes(body)
	if root.Get("type").Str != "message" {
		return nil, fmt.Errorf("%w: not a message", ErrMalformed)
	}
	r := &Response{ID: root.Get("id").Str, Finish: messagesFinish(root.Get("stop_reason").Str),
		StopSequence: root.Get("stop_sequence").Str, Usage: messagesUsage(root.Get("usage"))}
	root.Get("content").ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").Str {
		case "text":
			r.Content = append(r.Content, Part{Kind: PartText, Text: b.Get("text").Str})
		case "tool_use":
			r.Content = append(r.Content, Part{Kind: PartToolCall, ToolCall: &ToolCall{
				ID: b.Get("id").Str, Name: b.Get("name").Str, Arguments: b.Get("input").Raw}})
		}
		return true
	})
	return r, nil
}

type messageOut struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []messagesBlock  `json:"content"`
	StopReason   *string          `json:"stop_reason"` // null until the answer ends (message_start)
	StopSequence *string          `json:"stop_sequence"`
	Usage        messagesUsageOut `json:"usage"`
}

func (messagesCodec) encodeResponse(r *Response, o ResponseOptions) ([]byte, error) {
	out := messageOut{ID: r.ID, Type: "message", Role: "assistant", Model: o.PublicModel,
		Content: []messagesBlock{}, Usage: messagesUsageOf(r.Usage)}
	reason, seq := messagesFinishOut(r.Finish, r.StopSequence)
	out.StopReason, out.StopSequence = &reason, seq
	for _, p := range r.Content {
		switch p.Kind {
		case PartText:
			t := p.Text
			out.Content = append(out.Content, messagesBlock{Type: "text", Text: &t})
		case PartToolCall:
			input, err := toolArgsObject(p.ToolCall.Arguments, "")
			if err != nil {
				return nil, fmt.Errorf("%w: tool call arguments are not a JSON object", ErrMalformed)
			}
			out.Content = append(out.Content, messagesBlock{Type: "tool_use", ID: p.ToolCall.ID, Name: p.ToolCall.Name, Input: input})
		}
	}
	return marshal(out)
}
