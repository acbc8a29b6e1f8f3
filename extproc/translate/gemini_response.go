package translate

import (
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
)

// The gemini codec's response half: a GenerateContentResponse. The same object is each
// event of a stream (gemini_stream.go).

func (geminiCodec) decodeResponse(body []byte) (*Response, error) {
	if !gjson.ValidBytes(body) {
		return nil, fmt.Errorf("%w: generateContent answer is not JSON", ErrMalformed)
	}
	root := gjson.ParseBytes(body)
	cand := root.Get("candidates.0")
	if !cand.Exists() && !root.Get("promptFeedback").Exists() {
		return nil, fmt.Errorf("%w: no candidates", ErrMalformed)
	}
	r := &Response{ID: root.Get("responseId").Str, Usage: geminiUsage(root.Get("usageMetadata"))}
	calls := 0
	cand.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
		switch {
		case p.Get("thought").Type == gjson.True:
			// Thinking summaries: no other API's answer carries them (their tokens are
			// billed as output all the same).
		case p.Get("functionCall").Exists():
			r.Content = append(r.Content, Part{Kind: PartToolCall, ToolCall: geminiToolCall(p.Get("functionCall"), r.ID, calls)})
			calls++
		case p.Get("text").Exists():
			if n := len(r.Content); n > 0 && r.Content[n-1].Kind == PartText {
				r.Content[n-1].Text += p.Get("text").Str
			} else {
				r.Content = append(r.Content, Part{Kind: PartText, Text: p.Get("text").Str})
			}
		}
		return true
	})
	r.Finish = geminiFinish(cand.Get("finishReason").Str, calls > 0)
	if !cand.Exists() {
		r.Finish = FinishContentFilter // the prompt was blocked
	}
	return r, nil
}

// geminiToolCall reads a functionCall. Gemini API calls may carry an id; the others
// get one made of the answer's id and the call's position, unique in a conversation.
func geminiToolCall(c gjson.Result, respID string, n int) *ToolCall {
	id := c.Get("id").Str
	if id == "" {
		id = "call_" + respID + "_" + strconv.Itoa(n)
	}
	args := c.Get("args").Raw
	if args == "" {
		args = "{}"
	}
	return &ToolCall{ID: id, Name: c.Get("name").Str, Arguments: args}
}
