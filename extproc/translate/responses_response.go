package translate

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// The responses codec's response half: a complete Responses object.

func (responsesCodec) decodeResponse(body []byte) (*Response, error) {
	if !gjson.ValidBytes(body) {
		return nil, fmt.Errorf("%w: response is not JSON", ErrMalformed)
	}
	root := gjson.ParseBytes(body)
	if root.Get("object").Str != "response" {
		return nil, fmt.Errorf("%w: not a response object", ErrMalformed)
	}
	r := &Response{ID: root.Get("id").Str, Created: root.Get("created_at").Int(), Usage: openAIUsage(root.Get("usage"))}
	root.Get("output").ForEach(func(_, it gjson.Result) bool {
		switch it.Get("type").Str {
		case "message":
			it.Get("content").ForEach(func(_, c gjson.Result) bool {
				switch c.Get("type").Str {
				case "output_text":
					r.Content = append(r.Content, Part{Kind: PartText, Text: c.Get("text").Str})
				case "refusal":
					r.Content = append(r.Content, Part{Kind: PartText, Text: c.Get("refusal").Str})
				}
				return true
			})
		case "function_call":
			r.Content = append(r.Content, Part{Kind: PartToolCall, ToolCall: &ToolCall{
				ID: it.Get("call_id").Str, Name: it.Get("name").Str, Arguments: it.Get("arguments").Str}})
		}
		return true
	})
	r.Finish = responsesFinish(root.Get("status").Str, root.Get("incomplete_details.reason").Str, r.Content)
	return r, nil
}

// responsesFinish reads a response's status: completed (with function calls: tool
// calls), incomplete by output limit or content filter.
func responsesFinish(status, reason string, content []Part) Finish {
	switch {
	case status == "incomplete" && reason == "content_filter":
		return FinishContentFilter
	case status == "incomplete":
		return FinishLength
	}
	for _, p := range content {
		if p.Kind == PartToolCall {
			return FinishToolCalls
		}
	}
	return FinishStop
}

type responseOut struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	CreatedAt         int64              `json:"created_at"`
	Status            string             `json:"status"`
	IncompleteDetails *incompleteOut     `json:"incomplete_details"`
	Model             string             `json:"model"`
	Output            []any              `json:"output"`
	OutputText        string             `json:"output_text,omitempty"`
	Usage             *responsesUsageOut `json:"usage,omitempty"`
	ParallelToolCalls bool               `json:"parallel_tool_calls"`
	ToolChoice        string             `json:"tool_choice"`
	Tools             []any              `json:"tools"`
}

type incompleteOut struct {
	Reason string `json:"reason"`
}

type outputMessage struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type outputCall struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// responsesStatus writes a finish as a status and incomplete details.
func responsesStatus(f Finish) (string, *incompleteOut) {
	switch f {
	case FinishLength:
		return "incomplete", &incompleteOut{"max_output_tokens"}
	case FinishContentFilter:
		return "incomplete", &incompleteOut{"content_filter"}
	}
	return "completed", nil
}

// responseID is a Responses id for the upstream's id (kept when it is one already).
func responseID(id string) string {
	if strings.HasPrefix(id, "resp_") {
		return id
	}
	return "resp_" + id
}

// messageItemID is the id of the n-th message output item of a response.
func messageItemID(respID string, n int) string {
	return "msg_" + strings.TrimPrefix(respID, "resp_") + "_" + strconv.Itoa(n)
}

// callItemID is the id of a function_call output item.
func callItemID(callID string) string { return "fc_" + callID }

func (responsesCodec) encodeResponse(r *Response, o ResponseOptions) ([]byte, error) {
	id := responseID(r.ID)
	out := responseOut{ID: id, Object: "response", CreatedAt: r.Created, Model: o.PublicModel, Output: []any{},
		ParallelToolCalls: true, ToolChoice: "auto", Tools: []any{}}
	if out.CreatedAt == 0 {
		out.CreatedAt = o.Created
	}
	out.Status, out.IncompleteDetails = responsesStatus(r.Finish)
	u := responsesUsage(r.Usage)
	out.Usage = &u
	for _, p := range r.Content {
		switch p.Kind {
		case PartText:
			out.Output = append(out.Output, outputMessage{Type: "message", ID: messageItemID(id, len(out.Output)), Status: "completed",
				Role: "assistant", Content: []outputText{{Type: "output_text", Text: p.Text, Annotations: []any{}}}})
			out.OutputText += p.Text
		case PartToolCall:
			out.Output = append(out.Output, outputCall{Type: "function_call", ID: callItemID(p.ToolCall.ID), CallID: p.ToolCall.ID,
				Name: p.ToolCall.Name, Arguments: p.ToolCall.Arguments, Status: "completed"})
		}
	}
	return marshal(out)
}
