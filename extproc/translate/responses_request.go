package translate

import (
	"encoding/json"

	"github.com/llmgw/gateway/extproc/wire"
	"github.com/tidwall/gjson"
)

// The responses codec's request half: OpenAI Responses bodies, stateless subset (no
// previous_response_id, no stored items). The client's body was validated by
// extproc/openai before; only its meaning is read here.

func (responsesCodec) decodeRequest(body []byte) (*Request, error) {
	// Its fields found without walking the conversation again for each (wire.Object).
	root := wire.Members(gjson.ParseBytes(body))
	if err := checkFields(Responses, root); err != nil {
		return nil, err
	}
	r := &Request{
		Model:       root.Get("model").Str,
		MaxOutput:   root.Get("max_output_tokens").Int(),
		Temperature: floatPtr(root.Get("temperature")),
		TopP:        floatPtr(root.Get("top_p")),
		Stream:      root.Get("stream").Type == gjson.True,
		User:        root.Get("user").Str,
	}
	r.ParallelToolCalls = boolPtr(root.Get("parallel_tool_calls"))
	if s := root.Get("instructions").Str; s != "" {
		r.System = append(r.System, s)
	}
	var err error
	if err = responsesInput(r, root.Get("input")); err != nil {
		return nil, err
	}
	if r.Tools, err = functionTools(root.Get("tools"), "tools", false); err != nil {
		return nil, err
	}
	if r.ToolChoice, err = openAIToolChoice(root.Get("tool_choice"), false); err != nil {
		return nil, err
	}
	if f := root.Get("text.format"); f.IsObject() {
		r.ResponseFormat = openAIResponseFormat(f, f, "text.format")
	}
	return r, nil
}

// responsesInput reads input: a string (one user turn) or items — messages (any role),
// function_call and function_call_output; reasoning items are dropped.
func responsesInput(r *Request, in gjson.Result) error {
	if in.Type == gjson.String {
		r.Messages = []Message{{Role: RoleUser, Parts: []Part{{Kind: PartText, Text: in.Str}}}}
		return nil
	}
	var err error
	add := func(role Role, p Part) {
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
			r.Messages[n-1].Parts = append(r.Messages[n-1].Parts, p)
			return
		}
		r.Messages = append(r.Messages, Message{Role: role, Parts: []Part{p}})
	}
	i := -1
	wire.ForEach(in, func(it wire.Object) bool {
		i++
		p := at("input", i)
		typ := it.Get("type").Str
		switch {
		case typ == "function_call":
			add(RoleAssistant, Part{Kind: PartToolCall, ToolCall: &ToolCall{
				ID: it.Get("call_id").Str, Name: it.Get("name").Str, Arguments: it.Get("arguments").Str}})
		case typ == "function_call_output":
			text, ok := textOf(it.Get("output"), "input_text", "output_text")
			if !ok {
				err = unsupported(p+".output", "Only text function call outputs can be translated.")
				return false
			}
			add(RoleUser, Part{Kind: PartToolResult, ToolResult: &ToolResult{CallID: it.Get("call_id").Str,
				Content: []Part{{Kind: PartText, Text: text}}}})
		case typ == "reasoning":
		case typ == "message" || typ == "" && it.Get("role").Exists():
			role := it.Get("role").Str
			if role == "system" || role == "developer" {
				text, ok := textOf(it.Get("content"), "input_text")
				if !ok {
					err = unsupported(p+".content", "A system message can only carry text to be translated.")
					return false
				}
				r.System = append(r.System, text)
				return true
			}
			var parts []Part
			if parts, err = responsesContent(it.Get("content"), p+".content"); err != nil {
				return false
			}
			rl := RoleUser
			if role == "assistant" {
				rl = RoleAssistant
			}
			for _, part := range parts {
				add(rl, part)
			}
		default:
			err = unsupported(p, "Only message, function_call and function_call_output items can be translated.")
			return false
		}
		return true
	})
	return err
}

func responsesContent(c gjson.Result, param string) ([]Part, error) {
	if c.Type == gjson.String {
		return []Part{{Kind: PartText, Text: c.Str}}, nil
	}
	var parts []Part
	var err error
	j := -1
	wire.ForEach(c, func(p wire.Object) bool {
		j++
		switch p.Get("type").Str {
		case "input_text", "output_text":
			parts = append(parts, Part{Kind: PartText, Text: p.Get("text").Str})
		case "input_image":
			if p.Get("image_url").Str == "" {
				err = unsupported(at(param, j), "Only images given by URL can be translated.")
				return false
			}
			parts = append(parts, Part{Kind: PartImage, Image: imageFromURL(p.Get("image_url").Str, p.Get("detail").Str)})
		default:
			err = unsupported(at(param, j), "Only text and image content can be translated.")
			return false
		}
		return true
	})
	return parts, err
}

// Responses request shapes, as encoded.
type (
	responsesBody struct {
		Model             string          `json:"model"`
		Input             []any           `json:"input"`
		Instructions      string          `json:"instructions,omitempty"`
		MaxOutputTokens   int64           `json:"max_output_tokens,omitempty"`
		Temperature       *float64        `json:"temperature,omitempty"`
		TopP              *float64        `json:"top_p,omitempty"`
		Stream            bool            `json:"stream,omitempty"`
		Tools             []responsesTool `json:"tools,omitempty"`
		ToolChoice        any             `json:"tool_choice,omitempty"`
		ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
		User              string          `json:"user,omitempty"`
		Text              *responsesText  `json:"text,omitempty"`
		Store             bool            `json:"store"`
	}
	responsesText struct {
		Format any `json:"format"`
	}
	responsesTool struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	}
	responsesMsgIn struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	responsesPart struct {
		Type     string `json:"type"`
		Text     string `json:"text,omitempty"`
		ImageURL string `json:"image_url,omitempty"`
		Detail   string `json:"detail,omitempty"`
	}
	responsesCall struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments,omitempty"`
		Output    string `json:"output,omitempty"`
	}
)

func (responsesCodec) encodeRequest(r *Request, o RequestOptions) ([]byte, error) {
	b := responsesBody{
		Model: o.UpstreamModel, Input: []any{}, MaxOutputTokens: r.MaxOutput,
		Temperature: r.Temperature, TopP: r.TopP, Stream: r.Stream, ParallelToolCalls: r.ParallelToolCalls, User: r.User,
	}
	for i, s := range r.System {
		if i > 0 {
			b.Instructions += "\n\n"
		}
		b.Instructions += s
	}
	for _, m := range r.Messages {
		var parts []responsesPart
		for _, p := range m.Parts {
			switch p.Kind {
			case PartText:
				typ := "input_text"
				if m.Role == RoleAssistant {
					typ = "output_text"
				}
				parts = append(parts, responsesPart{Type: typ, Text: p.Text})
			case PartImage:
				d := p.Image.Detail
				if d == "" {
					d = "auto"
				}
				parts = append(parts, responsesPart{Type: "input_image", ImageURL: imageURL(p.Image), Detail: d})
			case PartToolCall:
				b.Input = append(b.Input, responsesCall{Type: "function_call", CallID: p.ToolCall.ID, Name: p.ToolCall.Name, Arguments: p.ToolCall.Arguments})
			case PartToolResult:
				b.Input = append(b.Input, responsesCall{Type: "function_call_output", CallID: p.ToolResult.CallID, Output: toolResultText(p.ToolResult)})
			}
		}
		if len(parts) == 0 {
			continue
		}
		role := "user"
		if m.Role == RoleAssistant {
			role = "assistant"
		}
		b.Input = append(b.Input, responsesMsgIn{Role: role, Content: parts})
	}
	for _, t := range r.Tools {
		b.Tools = append(b.Tools, responsesTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict})
	}
	if tc := r.ToolChoice; tc != nil {
		b.ToolChoice = openAIToolChoiceOut(tc, false)
	}
	if f := r.ResponseFormat; f != nil {
		if f.Type == FormatJSONObject {
			b.Text = &responsesText{Format: map[string]string{"type": "json_object"}}
		} else {
			format := map[string]any{"type": "json_schema", "name": f.Name}
			if f.Schema != nil {
				format["schema"] = f.Schema
			}
			if f.Strict != nil {
				format["strict"] = *f.Strict
			}
			b.Text = &responsesText{Format: format}
		}
	}
	return marshal(b)
}
