package translate

import "strings"

// featureID names one thing a client's request can ask for, as the neutral Request
// carries it: the rows of every upstream's table (upstreamFields).
type featureID uint8

const (
	fSystem featureID = iota
	fTurns
	fImageBytes
	fImageURL
	fImageType
	fImageDetail
	fToolCalls
	fToolResultImage
	fTools
	fToolStrict
	fToolChoice
	fToolChoiceNone
	fParallelToolCalls
	fMaxOutput
	fStop
	fTemperature
	fTemperatureAbove1
	fTopP
	fUser
	fJSONObject
	fJSONSchema
	fJSONSchemaOptions
	numFeatures
)

// feature is how one featureID is named, found in a Request and taken out of it.
type feature struct {
	// name says what the client asked for, in the docs and in a refusal.
	name string
	// params are the client's fields carrying it, per client API, comma-separated (""
	// where that API cannot ask for it): the docs' columns, and (the first) a refusal's
	// param unless find names a position.
	params [numClientAPIs]string
	// find reports whether r asks for it and, for a part of the conversation, the
	// param of its first occurrence ("" for params).
	find func(r *Request) (param string, ok bool)
	// drop takes every occurrence out of r.
	drop func(r *Request)
}

// numClientAPIs sizes tables indexed by client API (Chat, Messages, Responses are
// 1, 2, 3).
const numClientAPIs = int(Responses) + 1

// clientParams is params indexed by client API.
func clientParams(chat, messages, responses string) [numClientAPIs]string {
	return [numClientAPIs]string{Chat: chat, Messages: messages, Responses: responses}
}

// features is the one home of each feature's name, client fields and reading.
var features = [numFeatures]feature{
	fSystem: {"system prompt", clientParams("messages", "system", "instructions, input"),
		func(r *Request) (string, bool) { return "", len(r.System) > 0 },
		func(r *Request) { r.System = nil }},
	fTurns: {"text turns", clientParams("messages", "messages", "input"),
		findPart(func(p *Part) bool { return p.Kind == PartText }),
		dropParts(func(p *Part) bool { return p.Kind == PartText })},
	fImageBytes: {"image given by its bytes (base64, data: URL)", clientParams("messages", "messages", "input"),
		findPart(func(p *Part) bool { return p.Kind == PartImage && p.Image.Data != "" }),
		dropParts(func(p *Part) bool { return p.Kind == PartImage && p.Image.Data != "" })},
	fImageURL: {"image given by URL", clientParams("messages", "messages", "input"),
		findPart(func(p *Part) bool { return p.Kind == PartImage && p.Image.Data == "" }),
		dropParts(func(p *Part) bool { return p.Kind == PartImage && p.Image.Data == "" })},
	fImageType: {"image bytes other than PNG, JPEG, GIF or WebP", clientParams("messages", "messages", "input"),
		findPart(otherImageType), dropParts(otherImageType)},
	fImageDetail: {"image detail hint", clientParams("messages", "", "input"),
		findPart(func(p *Part) bool { return p.Kind == PartImage && p.Image.Detail != "" }),
		eachPart(func(p *Part) {
			if p.Kind == PartImage {
				p.Image.Detail = ""
			}
		})},
	fToolCalls: {"tool calls and text tool results", clientParams("messages", "messages", "input"),
		findPart(func(p *Part) bool { return p.Kind == PartToolCall || p.Kind == PartToolResult }),
		dropParts(func(p *Part) bool { return p.Kind == PartToolCall || p.Kind == PartToolResult })},
	fToolResultImage: {"tool result with an image", clientParams("", "messages", ""),
		findPart(toolResultImage), dropParts(toolResultImage)},
	fTools: {"function tools", clientParams("tools", "tools", "tools"),
		func(r *Request) (string, bool) { return "", len(r.Tools) > 0 },
		func(r *Request) { r.Tools = nil }},
	fToolStrict: {"strict tool schema", clientParams("tools", "", "tools"),
		func(r *Request) (string, bool) {
			for _, t := range r.Tools {
				if t.Strict != nil {
					return "", true
				}
			}
			return "", false
		},
		func(r *Request) {
			for i := range r.Tools {
				r.Tools[i].Strict = nil
			}
		}},
	fToolChoice: {"tool choice: auto, required, a named tool", clientParams("tool_choice", "tool_choice", "tool_choice"),
		func(r *Request) (string, bool) { return "", r.ToolChoice != nil && r.ToolChoice.Mode != ToolNone },
		dropToolChoice(func(m ToolChoiceMode) bool { return m != ToolNone })},
	fToolChoiceNone: {"tool choice none (tools given)", clientParams("tool_choice", "tool_choice", "tool_choice"),
		func(r *Request) (string, bool) {
			return "", r.ToolChoice != nil && r.ToolChoice.Mode == ToolNone && len(r.Tools) > 0
		},
		dropToolChoice(func(m ToolChoiceMode) bool { return m == ToolNone })},
	fParallelToolCalls: {"parallel tool calls on or off", clientParams("parallel_tool_calls", "tool_choice.disable_parallel_tool_use", "parallel_tool_calls"),
		func(r *Request) (string, bool) { return "", r.ParallelToolCalls != nil },
		func(r *Request) { r.ParallelToolCalls = nil }},
	fMaxOutput: {"output limit", clientParams("max_completion_tokens, max_tokens", "max_tokens", "max_output_tokens"),
		func(r *Request) (string, bool) { return "", r.MaxOutput != 0 },
		func(r *Request) { r.MaxOutput = 0 }},
	fStop: {"stop sequences", clientParams("stop", "stop_sequences", ""),
		func(r *Request) (string, bool) { return r.StopParam, len(r.Stop) > 0 },
		func(r *Request) { r.Stop = nil }},
	fTemperature: {"temperature up to 1", clientParams("temperature", "temperature", "temperature"),
		func(r *Request) (string, bool) { return "", r.Temperature != nil && *r.Temperature <= 1 },
		dropTemperature(func(t float64) bool { return t <= 1 })},
	fTemperatureAbove1: {"temperature above 1", clientParams("temperature", "", "temperature"),
		func(r *Request) (string, bool) { return "", r.Temperature != nil && *r.Temperature > 1 },
		dropTemperature(func(t float64) bool { return t > 1 })},
	fTopP: {"top_p", clientParams("top_p", "top_p", "top_p"),
		func(r *Request) (string, bool) { return "", r.TopP != nil },
		func(r *Request) { r.TopP = nil }},
	fUser: {"end user's id", clientParams("user", "metadata.user_id", "user"),
		func(r *Request) (string, bool) { return "", r.User != "" },
		func(r *Request) { r.User = "" }},
	fJSONObject: {"JSON output (json_object)", clientParams("response_format", "", "text.format"),
		findFormat(func(f *ResponseFormat) bool { return f.Type == FormatJSONObject }),
		func(r *Request) {
			if r.ResponseFormat != nil && r.ResponseFormat.Type == FormatJSONObject {
				r.ResponseFormat = nil
			}
		}},
	fJSONSchema: {"JSON schema output (json_schema)", clientParams("response_format", "", "text.format"),
		findFormat(func(f *ResponseFormat) bool { return f.Type == FormatJSONSchema }),
		func(r *Request) {
			if r.ResponseFormat != nil && r.ResponseFormat.Type == FormatJSONSchema {
				r.ResponseFormat = nil
			}
		}},
	fJSONSchemaOptions: {"JSON schema's name and strict", clientParams("response_format", "", "text.format"),
		findFormat(func(f *ResponseFormat) bool { return f.Type == FormatJSONSchema && (f.Name != "" || f.Strict != nil) }),
		func(r *Request) {
			if r.ResponseFormat != nil {
				r.ResponseFormat.Name, r.ResponseFormat.Strict = "", nil
			}
		}},
}

// param is the client's field to name when refusing f in r: where find found it, else
// f's field in the client's API.
func (f *feature) param(r *Request, found string) string {
	if found != "" {
		return found
	}
	ps := ""
	if int(r.Client) < numClientAPIs {
		ps = f.params[r.Client]
	}
	for _, p := range f.params {
		if ps == "" {
			ps = p
		}
	}
	first, _, _ := strings.Cut(ps, ", ")
	return first
}

// otherImageType: an image given by bytes of a media type some upstreams do not take.
func otherImageType(p *Part) bool {
	if p.Kind != PartImage || p.Image.Data == "" {
		return false
	}
	t, ok := strings.CutPrefix(p.Image.MediaType, "image/")
	return !ok || t != "png" && t != "jpeg" && t != "gif" && t != "webp"
}

// toolResultImage: a tool result carrying an image.
func toolResultImage(p *Part) bool {
	if p.Kind != PartToolResult {
		return false
	}
	for _, c := range p.ToolResult.Content {
		if c.Kind == PartImage {
			return true
		}
	}
	return false
}

// findPart finds the first part of the conversation (tool results' content included)
// matching, named by its turn ("messages[i]").
func findPart(match func(*Part) bool) func(*Request) (string, bool) {
	return func(r *Request) (string, bool) {
		for i := range r.Messages {
			for j := range r.Messages[i].Parts {
				p := &r.Messages[i].Parts[j]
				if match(p) {
					return at("messages", i), true
				}
				if p.Kind != PartToolResult {
					continue
				}
				for k := range p.ToolResult.Content {
					if match(&p.ToolResult.Content[k]) {
						return at("messages", i), true
					}
				}
			}
		}
		return "", false
	}
}

// eachPart calls edit on every part of the conversation, tool results' content
// included.
func eachPart(edit func(*Part)) func(*Request) {
	return func(r *Request) {
		for i := range r.Messages {
			for j := range r.Messages[i].Parts {
				p := &r.Messages[i].Parts[j]
				edit(p)
				if p.Kind == PartToolResult {
					for k := range p.ToolResult.Content {
						edit(&p.ToolResult.Content[k])
					}
				}
			}
		}
	}
}

// dropParts removes the parts matching, tool results' content included.
func dropParts(match func(*Part) bool) func(*Request) {
	keep := func(parts []Part) []Part {
		out := parts[:0]
		for _, p := range parts {
			if !match(&p) {
				out = append(out, p)
			}
		}
		return out
	}
	return func(r *Request) {
		for i := range r.Messages {
			r.Messages[i].Parts = keep(r.Messages[i].Parts)
			for _, p := range r.Messages[i].Parts {
				if p.Kind == PartToolResult {
					p.ToolResult.Content = keep(p.ToolResult.Content)
				}
			}
		}
	}
}

func dropToolChoice(match func(ToolChoiceMode) bool) func(*Request) {
	return func(r *Request) {
		if r.ToolChoice != nil && match(r.ToolChoice.Mode) {
			r.ToolChoice = nil
		}
	}
}

func dropTemperature(match func(float64) bool) func(*Request) {
	return func(r *Request) {
		if r.Temperature != nil && match(*r.Temperature) {
			r.Temperature = nil
		}
	}
}

func findFormat(match func(*ResponseFormat) bool) func(*Request) (string, bool) {
	return func(r *Request) (string, bool) {
		if f := r.ResponseFormat; f != nil && match(f) {
			return f.Param, true
		}
		return "", false
	}
}
