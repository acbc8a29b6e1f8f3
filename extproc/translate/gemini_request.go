package translate

import (
	"encoding/json"
)

// The gemini codec's request half: a generateContent body (Gemini API and Vertex AI
// alike). The model and the choice of stream are in the path, not the body.

type (
	geminiBody struct {
		Contents          []geminiContent   `json:"contents"`
		SystemInstruction *geminiContent    `json:"systemInstruction,omitempty"`
		Tools             []geminiTools     `json:"tools,omitempty"`
		ToolConfig        *geminiToolConfig `json:"toolConfig,omitempty"`
		GenerationConfig  *geminiGenConfig  `json:"generationConfig,omitempty"`
	}
	geminiContent struct {
		Role  string       `json:"role,omitempty"`
		Parts []geminiPart `json:"parts"`
	}
	geminiPart struct {
		Text             string          `json:"text,omitempty"`
		InlineData       *geminiBlob     `json:"inlineData,omitempty"`
		FunctionCall     *geminiCall     `json:"functionCall,omitempty"`
		FunctionResponse *geminiCallBack `json:"functionResponse,omitempty"`
	}
	geminiBlob struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	}
	// Calls and responses are matched by name, in order: the ids the gateway gives
	// calls are its own, so none is sent back.
	geminiCall struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	}
	geminiCallBack struct {
		Name     string         `json:"name"`
		Response map[string]any `json:"response"`
	}
	geminiTools struct {
		FunctionDeclarations []geminiFunction `json:"functionDeclarations"`
	}
	geminiFunction struct {
		Name                 string          `json:"name"`
		Description          string          `json:"description,omitempty"`
		ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
	}
	geminiToolConfig struct {
		FunctionCallingConfig geminiCallingConfig `json:"functionCallingConfig"`
	}
	geminiCallingConfig struct {
		Mode                 string   `json:"mode"`
		AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
	}
	geminiGenConfig struct {
		MaxOutputTokens    int64           `json:"maxOutputTokens,omitempty"`
		StopSequences      []string        `json:"stopSequences,omitempty"`
		Temperature        *float64        `json:"temperature,omitempty"`
		TopP               *float64        `json:"topP,omitempty"`
		ResponseMimeType   string          `json:"responseMimeType,omitempty"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	}
)

func (geminiCodec) encodeRequest(r *Request, o RequestOptions) ([]byte, error) {
	b := geminiBody{Contents: []geminiContent{}}
	if len(r.System) > 0 {
		sys := &geminiContent{}
		for _, s := range r.System {
			sys.Parts = append(sys.Parts, geminiPart{Text: s})
		}
		b.SystemInstruction = sys
	}
	// A function response names its function, which the neutral tool result does not:
	// it is found by the call's id in the history the client sent back.
	names := map[string]string{}
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			if p.Kind == PartToolCall {
				names[p.ToolCall.ID] = p.ToolCall.Name
			}
		}
	}
	for i, m := range r.Messages {
		c := geminiContent{Role: "user"}
		if m.Role == RoleAssistant {
			c.Role = "model"
		}
		for _, p := range m.Parts {
			part, skip, err := geminiPartOut(p, names, at("messages", i))
			if err != nil {
				return nil, err
			}
			if !skip {
				c.Parts = append(c.Parts, part)
			}
		}
		if len(c.Parts) > 0 {
			b.Contents = append(b.Contents, c)
		}
	}
	if len(r.Tools) > 0 {
		fs := make([]geminiFunction, 0, len(r.Tools))
		for _, t := range r.Tools {
			fs = append(fs, geminiFunction{Name: t.Name, Description: t.Description, ParametersJSONSchema: t.Parameters})
		}
		b.Tools = []geminiTools{{FunctionDeclarations: fs}}
	}
	if tc := r.ToolChoice; tc != nil {
		cfg := geminiCallingConfig{Mode: "AUTO"}
		switch tc.Mode {
		case ToolNone:
			cfg.Mode = "NONE"
		case ToolRequired:
			cfg.Mode = "ANY"
		case ToolNamed:
			cfg.Mode, cfg.AllowedFunctionNames = "ANY", []string{tc.Name}
		}
		b.ToolConfig = &geminiToolConfig{cfg}
	}
	g := geminiGenConfig{MaxOutputTokens: r.MaxOutput, StopSequences: r.Stop, Temperature: r.Temperature, TopP: r.TopP}
	if f := r.ResponseFormat; f != nil {
		g.ResponseMimeType = "application/json"
		if f.Type == FormatJSONSchema {
			g.ResponseJSONSchema = f.Schema
		}
	}
	if g.MaxOutputTokens != 0 || g.StopSequences != nil || g.Temperature != nil || g.TopP != nil || g.ResponseMimeType != "" {
		b.GenerationConfig = &g
	}
	return marshal(b)
}

// geminiPartOut writes one neutral part; skip is set for an empty text (the API
// refuses a part with no data) and for an image by URL.
func geminiPartOut(p Part, names map[string]string, param string) (out geminiPart, skip bool, err error) {
	switch p.Kind {
	case PartText:
		return geminiPart{Text: p.Text}, p.Text == "", nil
	case PartImage:
		// An image by URL cannot be written (geminiUpstream refuses it).
		if p.Image.Data == "" {
			return out, true, nil
		}
		return geminiPart{InlineData: &geminiBlob{MimeType: p.Image.MediaType, Data: p.Image.Data}}, false, nil
	case PartToolCall:
		args, err := toolArgsObject(p.ToolCall.Arguments, "messages")
		if err != nil {
			return out, false, err
		}
		return geminiPart{FunctionCall: &geminiCall{Name: p.ToolCall.Name, Args: args}}, false, nil
	case PartToolResult:
		name, ok := names[p.ToolResult.CallID]
		if !ok {
			return out, false, unsupported(param, "A tool result must answer a tool call of the conversation.")
		}
		key := "output"
		if p.ToolResult.IsError {
			key = "error"
		}
		return geminiPart{FunctionResponse: &geminiCallBack{Name: name,
			Response: map[string]any{key: toolResultText(p.ToolResult)}}}, false, nil
	}
	return out, true, nil
}
