package translate

import (
	"encoding/json"

	"github.com/llmgw/gateway/extproc/wire"
	"github.com/tidwall/gjson"
)

// The chat codec's request half: OpenAI Chat Completions bodies. The client's body was
// validated by extproc/openai before; only its meaning is read here.

func (chatCodec) decodeRequest(body []byte) (*Request, error) {
	// Its fields found without walking the conversation again for each (wire.Object).
	root := wire.Members(gjson.ParseBytes(body))
	if err := checkFields(Chat, root); err != nil {
		return nil, err
	}
	r := &Request{
		Model:       root.Get("model").Str,
		Temperature: floatPtr(root.Get("temperature")),
		TopP:        floatPtr(root.Get("top_p")),
		Stream:      root.Get("stream").Type == gjson.True,
		User:        root.Get("user").Str,
		StopParam:   "stop",
	}
	r.IncludeUsage = root.Get("stream_options.include_usage").Type == gjson.True
	r.MaxOutput = max(root.Get("max_tokens").Int(), root.Get("max_completion_tokens").Int())
	r.Stop = stopOf(root.Get("stop"))
	r.ParallelToolCalls = boolPtr(root.Get("parallel_tool_calls"))
	var err error
	if r.Messages, r.System, err = chatMessagesIn(root.Get("messages")); err != nil {
		return nil, err
	}
	if r.Tools, err = functionTools(root.Get("tools"), "tools", true); err != nil {
		return nil, err
	}
	if r.ToolChoice, err = openAIToolChoice(root.Get("tool_choice"), true); err != nil {
		return nil, err
	}
	if rf := root.Get("response_format"); rf.IsObject() {
		r.ResponseFormat = openAIResponseFormat(rf, rf.Get("json_schema"), "response_format")
	}
	return r, nil
}

// chatMessagesIn reads chat messages into turns and the system prompt. Consecutive
// tool messages become one user turn of tool results.
func chatMessagesIn(msgs gjson.Result) ([]Message, []string, error) {
	var out []Message
	var system []string
	var err error
	i := -1
	wire.ForEach(msgs, func(m wire.Object) bool {
		i++
		p := at("messages", i)
		c := m.Get("content")
		switch m.Get("role").Str {
		case "system", "developer":
			s, ok := textOf(c, "text")
			if !ok {
				err = unsupported(p+".content", "A system message can only carry text to be translated.")
				return false
			}
			system = append(system, s)
		case "user":
			var parts []Part
			if parts, err = chatUserParts(c, p+".content"); err != nil {
				return false
			}
			out = append(out, Message{Role: RoleUser, Parts: parts})
		case "assistant":
			if fc := m.Get("function_call"); fc.Exists() && fc.Type != gjson.Null {
				// The legacy call has no id for a tool result to answer, and its answer
				// comes in a "function" message the other APIs have no counterpart for.
				err = unsupported(p+".function_call", "A legacy function_call cannot be translated; use tool_calls.")
				return false
			}
			var parts []Part
			s, ok := textOf(c, "text", "refusal")
			if !ok {
				err = unsupported(p+".content", "An assistant message can only carry text to be translated.")
				return false
			}
			if s != "" {
				parts = append(parts, Part{Kind: PartText, Text: s})
			}
			j := -1
			m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
				j++
				if t := tc.Get("type").Str; t != "" && t != "function" {
					err = unsupported(at(p+".tool_calls", j), "Only function tool calls can be translated.")
					return false
				}
				parts = append(parts, Part{Kind: PartToolCall, ToolCall: &ToolCall{
					ID: tc.Get("id").Str, Name: tc.Get("function.name").Str, Arguments: tc.Get("function.arguments").Str,
				}})
				return true
			})
			if err != nil {
				return false
			}
			out = append(out, Message{Role: RoleAssistant, Parts: parts})
		case "tool":
			s, ok := textOf(c, "text")
			if !ok {
				err = unsupported(p+".content", "A tool message can only carry text to be translated.")
				return false
			}
			part := Part{Kind: PartToolResult, ToolResult: &ToolResult{CallID: m.Get("tool_call_id").Str, Content: []Part{{Kind: PartText, Text: s}}}}
			if n := len(out); n > 0 && out[n-1].Role == RoleUser && len(out[n-1].Parts) > 0 && out[n-1].Parts[0].Kind == PartToolResult {
				out[n-1].Parts = append(out[n-1].Parts, part)
			} else {
				out = append(out, Message{Role: RoleUser, Parts: []Part{part}})
			}
		}
		return true
	})
	return out, system, err
}

// chatUserParts reads a user message's content: text and image parts.
func chatUserParts(c gjson.Result, param string) ([]Part, error) {
	if c.Type == gjson.String {
		return []Part{{Kind: PartText, Text: c.Str}}, nil
	}
	var parts []Part
	var err error
	j := -1
	wire.ForEach(c, func(p wire.Object) bool {
		j++
		switch p.Get("type").Str {
		case "text":
			parts = append(parts, Part{Kind: PartText, Text: p.Get("text").Str})
		case "image_url":
			iu := p.Get("image_url")
			u := iu.Str
			if iu.IsObject() {
				u = iu.Get("url").Str
			}
			parts = append(parts, Part{Kind: PartImage, Image: imageFromURL(u, iu.Get("detail").Str)})
		default:
			err = unsupported(at(param, j), "Only text and image content parts can be translated.")
			return false
		}
		return true
	})
	return parts, err
}

// functionTools reads function tools: chat's nested {"type":"function","function":{...}}
// (nested true) or the Responses' flat {"type":"function","name",...}.
func functionTools(v gjson.Result, param string, nested bool) ([]Tool, error) {
	var tools []Tool
	var err error
	i := -1
	v.ForEach(func(_, t gjson.Result) bool {
		i++
		if t.Get("type").Str != "function" {
			err = unsupported(at(param, i), "Only function tools can be translated.")
			return false
		}
		f := t
		if nested {
			f = t.Get("function")
		}
		tools = append(tools, Tool{
			Name: f.Get("name").Str, Description: f.Get("description").Str,
			Parameters: rawOrNil(f.Get("parameters")), Strict: boolPtr(f.Get("strict")),
		})
		return true
	})
	return tools, err
}

// openAIToolChoice reads an OpenAI tool_choice: a mode string or a named function
// (chat: {"type":"function","function":{"name"}}; responses: {"type":"function","name"}).
func openAIToolChoice(v gjson.Result, nested bool) (*ToolChoice, error) {
	switch {
	case v.Type == gjson.String:
		switch v.Str {
		case "auto":
			return &ToolChoice{Mode: ToolAuto}, nil
		case "none":
			return &ToolChoice{Mode: ToolNone}, nil
		case "required":
			return &ToolChoice{Mode: ToolRequired}, nil
		}
	case v.IsObject() && v.Get("type").Str == "function":
		name := v.Get("name").Str
		if nested {
			name = v.Get("function.name").Str
		}
		return &ToolChoice{Mode: ToolNamed, Name: name}, nil
	case !v.Exists() || v.Type == gjson.Null:
		return nil, nil
	}
	return nil, unsupported("tool_choice", "This tool_choice cannot be translated.")
}

// openAIResponseFormat reads response_format (chat) or text.format (responses): nil for
// plain text. schema is where the json_schema's fields are (chat nests them).
func openAIResponseFormat(f, schema gjson.Result, param string) *ResponseFormat {
	switch f.Get("type").Str {
	case "json_object":
		return &ResponseFormat{Type: FormatJSONObject, Param: param}
	case "json_schema":
		return &ResponseFormat{Type: FormatJSONSchema, Name: schema.Get("name").Str,
			Schema: rawOrNil(schema.Get("schema")), Strict: boolPtr(schema.Get("strict")), Param: param}
	}
	return nil
}

// Chat request shapes, as encoded.
type (
	chatBody struct {
		Model               string           `json:"model"`
		Messages            []chatMsg        `json:"messages"`
		MaxCompletionTokens int64            `json:"max_completion_tokens,omitempty"`
		Stop                []string         `json:"stop,omitempty"`
		Temperature         *float64         `json:"temperature,omitempty"`
		TopP                *float64         `json:"top_p,omitempty"`
		Stream              bool             `json:"stream,omitempty"`
		StreamOptions       *chatStreamOpts  `json:"stream_options,omitempty"`
		Tools               []chatTool       `json:"tools,omitempty"`
		ToolChoice          any              `json:"tool_choice,omitempty"`
		ParallelToolCalls   *bool            `json:"parallel_tool_calls,omitempty"`
		User                string           `json:"user,omitempty"`
		ResponseFormat      *json.RawMessage `json:"response_format,omitempty"`
	}
	chatStreamOpts struct {
		IncludeUsage bool `json:"include_usage"`
	}
	chatMsg struct {
		Role       string         `json:"role"`
		Content    any            `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatPart struct {
		Type     string        `json:"type"`
		Text     string        `json:"text,omitempty"`
		ImageURL *chatImageURL `json:"image_url,omitempty"`
	}
	chatImageURL struct {
		URL    string `json:"url"`
		Detail string `json:"detail,omitempty"`
	}
	chatToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	chatFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	chatTool struct {
		Type     string      `json:"type"`
		Function chatToolDef `json:"function"`
	}
	chatToolDef struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	}
)

func (chatCodec) encodeRequest(r *Request, o RequestOptions) ([]byte, error) {
	b := chatBody{
		Model: o.UpstreamModel, MaxCompletionTokens: r.MaxOutput, Stop: r.Stop,
		Temperature: r.Temperature, TopP: r.TopP, Stream: r.Stream,
		ParallelToolCalls: r.ParallelToolCalls, User: r.User,
	}
	if r.Stream {
		b.StreamOptions = &chatStreamOpts{IncludeUsage: true}
	}
	for _, s := range r.System {
		b.Messages = append(b.Messages, chatMsg{Role: "system", Content: s})
	}
	for _, m := range r.Messages {
		b.Messages = append(b.Messages, chatMessagesOut(m)...)
	}
	for _, t := range r.Tools {
		b.Tools = append(b.Tools, chatTool{Type: "function", Function: chatToolDef(t)})
	}
	if tc := r.ToolChoice; tc != nil {
		b.ToolChoice = openAIToolChoiceOut(tc, true)
	}
	if f := r.ResponseFormat; f != nil {
		raw, err := marshal(chatResponseFormat(f))
		if err != nil {
			return nil, err
		}
		m := json.RawMessage(raw)
		b.ResponseFormat = &m
	}
	return marshal(b)
}

// chatMessagesOut writes one turn as chat messages: a user turn's tool results become
// tool messages (before its other content), an assistant turn one assistant message.
func chatMessagesOut(m Message) []chatMsg {
	var out []chatMsg
	if m.Role == RoleAssistant {
		msg := chatMsg{Role: "assistant"}
		text := ""
		for _, p := range m.Parts {
			switch p.Kind {
			case PartText:
				text += p.Text
			case PartToolCall:
				msg.ToolCalls = append(msg.ToolCalls, chatToolCall{ID: p.ToolCall.ID, Type: "function",
					Function: chatFunction{Name: p.ToolCall.Name, Arguments: p.ToolCall.Arguments}})
			}
		}
		if text != "" || len(msg.ToolCalls) == 0 {
			msg.Content = text
		}
		return append(out, msg)
	}
	var parts []chatPart
	for _, p := range m.Parts {
		switch p.Kind {
		case PartToolResult:
			out = append(out, chatMsg{Role: "tool", ToolCallID: p.ToolResult.CallID, Content: toolResultText(p.ToolResult)})
		case PartText:
			parts = append(parts, chatPart{Type: "text", Text: p.Text})
		case PartImage:
			parts = append(parts, chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: imageURL(p.Image), Detail: p.Image.Detail}})
		}
	}
	switch {
	case len(parts) == 1 && parts[0].Type == "text":
		out = append(out, chatMsg{Role: "user", Content: parts[0].Text})
	case len(parts) > 0:
		out = append(out, chatMsg{Role: "user", Content: parts})
	}
	return out
}

// openAIToolChoiceOut writes a tool choice in OpenAI's shape (chat nests the name).
func openAIToolChoiceOut(tc *ToolChoice, nested bool) any {
	switch tc.Mode {
	case ToolNone:
		return "none"
	case ToolRequired:
		return "required"
	case ToolNamed:
		if nested {
			return map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		}
		return map[string]string{"type": "function", "name": tc.Name}
	}
	return "auto"
}

// chatResponseFormat is response_format for chat.
func chatResponseFormat(f *ResponseFormat) any {
	if f.Type == FormatJSONObject {
		return map[string]string{"type": "json_object"}
	}
	s := map[string]any{"name": f.Name}
	if f.Schema != nil {
		s["schema"] = f.Schema
	}
	if f.Strict != nil {
		s["strict"] = *f.Strict
	}
	return map[string]any{"type": "json_schema", "json_schema": s}
}
