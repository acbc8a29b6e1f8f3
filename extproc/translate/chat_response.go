package translate

import (
	"fmt"

	"github.com/tidwall/gjson"
)

// The chat codec's response half: a complete Chat Completions answer.

func (chatCodec) decodeResponse(body []byte) (*Response, error) {
	if !gjson.ValidBytes(body) {
		return nil, fmt.Errorf("%w: chat completion is not JSON", ErrMalformed)
	}
	root := gjson.ParseBytes(body)
	ch := root.Get("choices.0")
	if !ch.IsObject() {
		return nil, fmt.Errorf("%w: chat completion without choices", ErrMalformed)
	}
	r := &Response{ID: root.Get("id").Str, Created: root.Get("created").Int(),
		Finish: chatFinish(ch.Get("finish_reason").Str), Usage: openAIUsage(root.Get("usage"))}
	msg := ch.Get("message")
	text := msg.Get("content").Str
	if text == "" {
		text = msg.Get("refusal").Str
	}
	if text != "" {
		r.Content = append(r.Content, Part{Kind: PartText, Text: text})
	}
	msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		r.Content = append(r.Content, Part{Kind: PartToolCall, ToolCall: &ToolCall{
			ID: tc.Get("id").Str, Name: tc.Get("function.name").Str, Arguments: tc.Get("function.arguments").Str}})
		return true
	})
	return r, nil
}

type chatCompletionOut struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []chatChoiceOut `json:"choices"`
	Usage   chatUsageOut    `json:"usage"`
}

type chatChoiceOut struct {
	Index        int            `json:"index"`
	Message      chatMessageOut `json:"message"`
	FinishReason string         `json:"finish_reason"`
	Logprobs     *struct{}      `json:"logprobs"`
}

type chatMessageOut struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

func (chatCodec) encodeResponse(r *Response, o ResponseOptions) ([]byte, error) {
	out := chatCompletionOut{ID: r.ID, Object: "chat.completion", Created: r.Created, Model: o.PublicModel, Usage: chatUsage(r.Usage)}
	if out.Created == 0 {
		out.Created = o.Created
	}
	msg := chatMessageOut{Role: "assistant"}
	text, hasText := "", false
	for _, p := range r.Content {
		switch p.Kind {
		case PartText:
			text += p.Text
			hasText = true
		case PartToolCall:
			msg.ToolCalls = append(msg.ToolCalls, chatToolCall{ID: p.ToolCall.ID, Type: "function",
				Function: chatFunction{Name: p.ToolCall.Name, Arguments: p.ToolCall.Arguments}})
		}
	}
	if hasText || len(msg.ToolCalls) == 0 {
		msg.Content = &text
	}
	out.Choices = []chatChoiceOut{{Index: 0, Message: msg, FinishReason: chatFinishOut(r.Finish)}}
	return marshal(out)
}
