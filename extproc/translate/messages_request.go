package translate

import (
	"encoding/json"

	"github.com/llmgw/gateway/extproc/wire"
	"github.com/tidwall/gjson"
)

// The messages codec's request half: Anthropic Messages bodies. The client's body was
// validated by extproc/anthropic before; only its meaning is read here.

func (messagesCodec) decodeRequest(body []byte) (*Request, error) {
	// Its fields found without walking the conversation again for each (wire.Object).
	root := wire.Members(gjson.ParseBytes(body))
	if err := checkFields(Messages, root); err != nil {
		return nil, err
	}
	r := &Request{
		Model:       root.Get("model").Str,
		MaxOutput:   root.Get("max_tokens").Int(),
		Temperature: floatPtr(root.Get("temperature")),
		TopP:        floatPtr(root.Get("top_p")),
		Stream:      root.Get("stream").Type == gjson.True,
		User:        root.Get("metadata.user_id").Str,
		Stop:        stopOf(root.Get("stop_sequences")),
		StopParam:   "stop_sequences",
	}
	if s := root.Get("system"); s.Exists() {
		text, ok := textOf(s, "text")
		if !ok {
			return nil, unsupported("system", "Only text system blocks can be translated.")
		}
		if text != "" {
			r.System = []string{text}
		}
	}
	var err error
	i := -1
	wire.ForEach(root.Get("messages"), func(m wire.Object) bool {
		i++
		msg := Message{Role: RoleUser}
		if m.Get("role").Str == "assistant" {
			msg.Role = RoleAssistant
		}
		if msg.Parts, err = messagesBlocks(m.Get("content"), at("messages", i)+".content"); err != nil {
			return false
		}
		r.Messages = append(r.Messages, msg)
		return true
	})
	if err != nil {
		return nil, err
	}
	i = -1
	root.Get("tools").ForEach(func(_, t gjson.Result) bool {
		i++
		if typ := t.Get("type").Str; typ != "" && typ != "custom" {
			err = unsupported(at("tools", i), "Only client tools can be translated.")
			return false
		}
		r.Tools = append(r.Tools, Tool{Name: t.Get("name").Str, Description: t.Get("description").Str,
			Parameters: rawOrNil(t.Get("input_schema"))})
		return true
	})
	if err != nil {
		return nil, err
	}
	if tc := root.Get("tool_choice"); tc.IsObject() {
		switch tc.Get("type").Str {
		case "auto":
			r.ToolChoice = &ToolChoice{Mode: ToolAuto}
		case "any":
			r.ToolChoice = &ToolChoice{Mode: ToolRequired}
		case "none":
			r.ToolChoice = &ToolChoice{Mode: ToolNone}
		case "tool":
			r.ToolChoice = &ToolChoice{Mode: ToolNamed, Name: tc.Get("name").Str}
		}
		if tc.Get("disable_parallel_tool_use").Type == gjson.True {
			f := false
			r.ParallelToolCalls = &f
		}
	}
	return r, nil
}

// messagesBlocks reads a message's content: a string or text, image, tool_use and
// tool_result blocks (thinking blocks of earlier answers are dropped: the other APIs
// cannot take them back, and they change nothing of the turn's meaning).
func messagesBlocks(c gjson.Result, param string) ([]Part, error) {
	if c.Type == gjson.String {
		return []Part{{Kind: PartText, Text: c.Str}}, nil
	}
	var parts []Part
	var err error
	j := -1
	wire.ForEach(c, func(b wire.Object) bool {
		j++
		p := at(param, j)
		switch b.Get("type").Str {
		case "text":
			parts = append(parts, Part{Kind: PartText, Text: b.Get("text").Str})
		case "image":
			var im *Image
			if im, err = messagesImage(b.Get("source"), p); err != nil {
				return false
			}
			parts = append(parts, Part{Kind: PartImage, Image: im})
		case "tool_use":
			parts = append(parts, Part{Kind: PartToolCall, ToolCall: &ToolCall{
				ID: b.Get("id").Str, Name: b.Get("name").Str, Arguments: b.Get("input").Raw}})
		case "tool_result":
			res := &ToolResult{CallID: b.Get("tool_use_id").Str, IsError: b.Get("is_error").Type == gjson.True}
			if res.Content, err = messagesBlocks(b.Get("content"), p+".content"); err != nil {
				return false
			}
			parts = append(parts, Part{Kind: PartToolResult, ToolResult: res})
		case "thinking", "redacted_thinking":
		default:
			err = unsupported(p, "Only text, image, tool_use and tool_result blocks can be translated.")
			return false
		}
		return true
	})
	return parts, err
}

func messagesImage(src gjson.Result, param string) (*Image, error) {
	switch src.Get("type").Str {
	case "base64":
		return &Image{MediaType: src.Get("media_type").Str, Data: src.Get("data").Str}, nil
	case "url":
		return &Image{URL: src.Get("url").Str}, nil
	}
	return nil, unsupported(param+".source", "Only base64 and url image sources can be translated.")
}

// Messages request shapes, as encoded.
type (
	messagesBody struct {
		// Model is empty toward Vertex AI, whose path names the model.
		Model            string               `json:"model,omitempty"`
		AnthropicVersion string               `json:"anthropic_version,omitempty"`
		MaxTokens        int64                `json:"max_tokens"`
		System           string               `json:"system,omitempty"`
		Messages         []messagesMsg        `json:"messages"`
		StopSequences    []string             `json:"stop_sequences,omitempty"`
		Temperature      *float64             `json:"temperature,omitempty"`
		TopP             *float64             `json:"top_p,omitempty"`
		Stream           bool                 `json:"stream,omitempty"`
		Tools            []messagesTool       `json:"tools,omitempty"`
		ToolChoice       *messagesToolChoice  `json:"tool_choice,omitempty"`
		Metadata         *messagesRequestMeta `json:"metadata,omitempty"`
	}
	messagesRequestMeta struct {
		UserID string `json:"user_id"`
	}
	messagesMsg struct {
		Role    string          `json:"role"`
		Content []messagesBlock `json:"content"`
	}
	messagesBlock struct {
		Type      string          `json:"type"`
		Text      *string         `json:"text,omitempty"`
		Source    *messagesSource `json:"source,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
		ToolUseID string          `json:"tool_use_id,omitempty"`
		Content   []messagesBlock `json:"content,omitempty"`
		IsError   bool            `json:"is_error,omitempty"`
	}
	messagesSource struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type,omitempty"`
		Data      string `json:"data,omitempty"`
		URL       string `json:"url,omitempty"`
	}
	messagesTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	messagesToolChoice struct {
		Type                   string `json:"type"`
		Name                   string `json:"name,omitempty"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
	}
)

func (messagesCodec) encodeRequest(r *Request, o RequestOptions) ([]byte, error) {
	b, err := messagesBodyOf(r, o)
	if err != nil {
		return nil, err
	}
	return marshal(b)
}

// messagesBodyOf is the Messages body of r, shared by Anthropic and Vertex AI.
func messagesBodyOf(r *Request, o RequestOptions) (*messagesBody, error) {
	b := messagesBody{
		Model: o.UpstreamModel, MaxTokens: r.MaxOutput, StopSequences: r.Stop,
		Temperature: r.Temperature, TopP: r.TopP, Stream: r.Stream,
	}
	if b.MaxTokens == 0 {
		b.MaxTokens = o.MaxOutput
	}
	for i, s := range r.System {
		if i > 0 {
			b.System += "\n\n"
		}
		b.System += s
	}
	if r.User != "" {
		b.Metadata = &messagesRequestMeta{UserID: r.User}
	}
	turns, err := alternatingTurns(r.Messages, messagesBlocksOut)
	if err != nil {
		return nil, err
	}
	for _, t := range turns {
		b.Messages = append(b.Messages, messagesMsg{Role: t.role, Content: t.blocks})
	}
	for _, t := range r.Tools {
		schema := t.Parameters
		if schema == nil {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		b.Tools = append(b.Tools, messagesTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	if tc := r.ToolChoice; tc != nil || r.ParallelToolCalls != nil && !*r.ParallelToolCalls {
		c := &messagesToolChoice{Type: "auto"}
		if tc != nil {
			switch tc.Mode {
			case ToolNone:
				c.Type = "none"
			case ToolRequired:
				c.Type = "any"
			case ToolNamed:
				c.Type, c.Name = "tool", tc.Name
			}
		}
		c.DisableParallelToolUse = r.ParallelToolCalls != nil && !*r.ParallelToolCalls && c.Type != "none"
		if len(b.Tools) > 0 || c.Type == "none" {
			b.ToolChoice = c
		}
	}
	return &b, nil
}

// messagesBlocksOut writes parts as content blocks: tool results first (the API wants
// them at the start of a user turn), empty text skipped (the API refuses it).
func messagesBlocksOut(parts []Part) ([]messagesBlock, error) {
	var results, rest []messagesBlock
	for _, p := range parts {
		switch p.Kind {
		case PartText:
			if p.Text == "" {
				continue
			}
			t := p.Text
			rest = append(rest, messagesBlock{Type: "text", Text: &t})
		case PartImage:
			rest = append(rest, messagesImageOut(p.Image))
		case PartToolCall:
			input, err := toolArgsObject(p.ToolCall.Arguments, "messages")
			if err != nil {
				return nil, err
			}
			rest = append(rest, messagesBlock{Type: "tool_use", ID: p.ToolCall.ID, Name: p.ToolCall.Name, Input: input})
		case PartToolResult:
			content, err := messagesBlocksOut(p.ToolResult.Content)
			if err != nil {
				return nil, err
			}
			results = append(results, messagesBlock{Type: "tool_result", ToolUseID: p.ToolResult.CallID,
				Content: content, IsError: p.ToolResult.IsError})
		}
	}
	return append(results, rest...), nil
}

func messagesImageOut(im *Image) messagesBlock {
	if im.URL != "" {
		return messagesBlock{Type: "image", Source: &messagesSource{Type: "url", URL: im.URL}}
	}
	return messagesBlock{Type: "image", Source: &messagesSource{Type: "base64", MediaType: im.MediaType, Data: im.Data}}
}
