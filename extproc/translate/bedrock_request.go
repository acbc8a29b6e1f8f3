package translate

import (
	"encoding/json"
	"strings"
)

// The bedrock codec's request half: a Converse body. The model and the choice of
// stream are in the path (/model/{id}/converse or /converse-stream).

type (
	bedrockBody struct {
		Messages        []bedrockMsg       `json:"messages"`
		System          []bedrockBlock     `json:"system,omitempty"`
		InferenceConfig *bedrockInference  `json:"inferenceConfig,omitempty"`
		ToolConfig      *bedrockToolConfig `json:"toolConfig,omitempty"`
	}
	bedrockMsg struct {
		Role    string         `json:"role"`
		Content []bedrockBlock `json:"content"`
	}
	bedrockBlock struct {
		Text       *string            `json:"text,omitempty"`
		Image      *bedrockImage      `json:"image,omitempty"`
		ToolUse    *bedrockToolUse    `json:"toolUse,omitempty"`
		ToolResult *bedrockToolResult `json:"toolResult,omitempty"`
	}
	bedrockImage struct {
		Format string `json:"format"`
		Source struct {
			Bytes string `json:"bytes"`
		} `json:"source"`
	}
	bedrockToolUse struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	}
	bedrockToolResult struct {
		ToolUseID string         `json:"toolUseId"`
		Content   []bedrockBlock `json:"content"`
		Status    string         `json:"status,omitempty"`
	}
	bedrockInference struct {
		MaxTokens     int64    `json:"maxTokens,omitempty"`
		StopSequences []string `json:"stopSequences,omitempty"`
		Temperature   *float64 `json:"temperature,omitempty"`
		TopP          *float64 `json:"topP,omitempty"`
	}
	bedrockToolConfig struct {
		Tools      []bedrockTool  `json:"tools"`
		ToolChoice map[string]any `json:"toolChoice,omitempty"`
	}
	bedrockTool struct {
		ToolSpec struct {
			Name        string `json:"name"`
			Description string `json:"description,omitempty"`
			InputSchema struct {
				JSON json.RawMessage `json:"json"`
			} `json:"inputSchema"`
		} `json:"toolSpec"`
	}
)

func (bedrockCodec) encodeRequest(r *Request, o RequestOptions) ([]byte, error) {
	b := bedrockBody{Messages: []bedrockMsg{}}
	for _, s := range r.System {
		b.System = append(b.System, bedrockBlock{Text: &s})
	}
	turns, err := alternatingTurns(r.Messages, bedrockBlocksOut)
	if err != nil {
		return nil, err
	}
	for _, t := range turns {
		b.Messages = append(b.Messages, bedrockMsg{Role: t.role, Content: t.blocks})
	}
	in := bedrockInference{MaxTokens: r.MaxOutput, StopSequences: r.Stop, Temperature: r.Temperature, TopP: r.TopP}
	if in.MaxTokens == 0 {
		in.MaxTokens = o.MaxOutput
	}
	if in.MaxTokens != 0 || in.StopSequences != nil || in.Temperature != nil || in.TopP != nil {
		b.InferenceConfig = &in
	}
	if len(r.Tools) > 0 {
		tc := &bedrockToolConfig{}
		for _, t := range r.Tools {
			var bt bedrockTool
			bt.ToolSpec.Name, bt.ToolSpec.Description = t.Name, t.Description
			bt.ToolSpec.InputSchema.JSON = t.Parameters
			if bt.ToolSpec.InputSchema.JSON == nil {
				bt.ToolSpec.InputSchema.JSON = json.RawMessage(`{"type":"object"}`)
			}
			tc.Tools = append(tc.Tools, bt)
		}
		if c := r.ToolChoice; c != nil {
			switch c.Mode {
			case ToolNone:
				// Converse has no such choice (bedrockUpstream refuses it).
			case ToolRequired:
				tc.ToolChoice = map[string]any{"any": struct{}{}}
			case ToolNamed:
				tc.ToolChoice = map[string]any{"tool": map[string]string{"name": c.Name}}
			default:
				tc.ToolChoice = map[string]any{"auto": struct{}{}}
			}
		}
		b.ToolConfig = tc
	}
	return marshal(b)
}

// bedrockBlocksOut writes parts as content blocks: tool results first, as Messages
// wants them; empty text skipped (Converse refuses it).
func bedrockBlocksOut(parts []Part) ([]bedrockBlock, error) {
	var results, rest []bedrockBlock
	for _, p := range parts {
		switch p.Kind {
		case PartText:
			if p.Text != "" {
				t := p.Text
				rest = append(rest, bedrockBlock{Text: &t})
			}
		case PartImage:
			if im := bedrockImageOut(p.Image); im != nil {
				rest = append(rest, bedrockBlock{Image: im})
			}
		case PartToolCall:
			input, err := toolArgsObject(p.ToolCall.Arguments, "messages")
			if err != nil {
				return nil, err
			}
			rest = append(rest, bedrockBlock{ToolUse: &bedrockToolUse{ToolUseID: p.ToolCall.ID, Name: p.ToolCall.Name, Input: input}})
		case PartToolResult:
			content, err := bedrockBlocksOut(p.ToolResult.Content)
			if err != nil {
				return nil, err
			}
			if content == nil {
				content = []bedrockBlock{}
			}
			res := &bedrockToolResult{ToolUseID: p.ToolResult.CallID, Content: content}
			if p.ToolResult.IsError {
				res.Status = "error"
			}
			results = append(results, bedrockBlock{ToolResult: res})
		}
	}
	return append(results, rest...), nil
}

// bedrockImageOut writes an image by its bytes, its format named by its media type;
// nil for an image by URL, which Converse cannot take (bedrockUpstream refuses it, and
// media types it does not know).
func bedrockImageOut(im *Image) *bedrockImage {
	if im.Data == "" {
		return nil
	}
	out := &bedrockImage{Format: strings.TrimPrefix(im.MediaType, "image/")}
	out.Source.Bytes = im.Data
	return out
}
