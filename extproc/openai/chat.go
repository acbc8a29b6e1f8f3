// Package openai holds the OpenAI wire format's request rules: validation of a Chat
// Completions body exactly as the API spec (section 4.1) states, reading fields with gjson
// from the client's bytes, and the in-place edits the gateway makes to such a body.
//
// Every failure is an *apierr.Error with the spec's code and the offending field in
// Param. It never re-marshals a body: provider extension fields pass through untouched.
package openai

import (
	"strconv"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/wire"
	"github.com/tidwall/gjson"
)

var chatRoles = map[string]bool{"developer": true, "system": true, "user": true, "assistant": true, "tool": true}

// ParseChat validates a Chat Completions request body and returns its neutral form.
//
// Decisions the spec leaves open: max_tokens and max_completion_tokens must be written
// as JSON integers (1.0 and 1e3 are refused: "integer" is a JSON-text property here, and
// the upstream providers refuse them too); when both are given the larger one bounds the
// output. n accepts any JSON number equal to 1. null counts as absent for optional
// fields, except content, where null is an allowed value. content may be left out only
// by an assistant message that calls tools or a function (OpenAI's rule, which every
// official SDK relies on when it sends a tool call back).
func ParseChat(body []byte) (wire.Parsed, *apierr.Error) {
	root, p, err := wire.Begin(body)
	if err != nil {
		return p, err
	}
	if p.Prompt, err = chatMessages(root.Get("messages")); err != nil {
		return p, err
	}
	mt, err := wire.PositiveInt(root, "max_tokens", false)
	if err != nil {
		return p, err
	}
	mct, err := wire.PositiveInt(root, "max_completion_tokens", false)
	if err != nil {
		return p, err
	}
	switch {
	case mct >= mt && mct > 0:
		p.MaxOutput, p.MaxOutputParam = mct, "max_completion_tokens"
	case mt > 0:
		p.MaxOutput, p.MaxOutputParam = mt, "max_tokens"
	}
	if p.Stream, err = wire.Stream(root); err != nil {
		return p, err
	}
	if err := wire.OnlyOne(root, "The 'n' field only accepts the value 1."); err != nil {
		return p, err
	}
	if err := wire.Range(root, "temperature", 0, 2); err != nil {
		return p, err
	}
	if err := wire.Range(root, "top_p", 0, 1); err != nil {
		return p, err
	}
	if err := wire.OptionalObject(root, "stream_options"); err != nil {
		return p, err
	}
	if so := root.Get("stream_options"); so.Exists() && so.Type != gjson.Null {
		iu := so.Get("include_usage")
		if iu.Exists() && iu.Type != gjson.True && iu.Type != gjson.False && iu.Type != gjson.Null {
			return p, apierr.Param(apierr.InvalidRequest, "stream_options.include_usage", "The 'stream_options.include_usage' field must be a boolean.")
		}
		p.IncludeUsage = iu.Type == gjson.True
	}
	if err := typed(root); err != nil {
		return p, err
	}
	if p.RateCard, err = wire.ReadRateCard(root, body); err != nil {
		return p, err
	}
	// Everything but the walked messages is billed as JSON (tools, functions,
	// response_format, …); prediction is billed as output.
	p.Prompt.JSON = append(p.Prompt.JSON, wire.Extras(root, "model", "messages", "prediction")...)
	p.Prompt.Tools = root.Get("tools").IsArray() || root.Get("functions").IsArray()
	if pr := root.Get("prediction"); pr.Exists() && pr.Type != gjson.Null {
		p.Prompt.Output = append(p.Prompt.Output, pr.Raw)
	}
	p.Unpriced = wire.ServerTools(root, clientTool)
	if w := root.Get("web_search_options"); w.Exists() && w.Type != gjson.Null {
		p.Unpriced = "web_search_options"
	}
	return p, nil
}

// clientTool reports whether an OpenAI tool type is run by the client (function and
// custom tools): only their tokens are billed. Built-in tools (web search, file search,
// code interpreter, image generation, …) are run and billed by the provider per call.
func clientTool(typ string) bool { return typ == "function" || typ == "custom" }

// typed checks the types of the optional fields the spec types, and of the legacy
// functions and the prediction the estimate counts.
func typed(root wire.Object) *apierr.Error {
	if s := root.Get("stop"); s.Exists() && s.Type != gjson.Null && s.Type != gjson.String &&
		!wire.ArrayOf(s, wire.IsString) {
		return apierr.Param(apierr.InvalidRequest, "stop", "The 'stop' field must be a string or an array of strings.")
	}
	for _, f := range []string{"tools", "functions"} {
		if _, err := wire.OptionalObjectArray(root, f); err != nil {
			return err
		}
	}
	if err := wire.OptionalStringOrObject(root, "tool_choice"); err != nil {
		return err
	}
	for _, f := range []string{"response_format", "prediction"} {
		if err := wire.OptionalObject(root, f); err != nil {
			return err
		}
	}
	if _, err := wire.OptionalString(root, "user"); err != nil {
		return err
	}
	return nil
}

func chatMessages(msgs gjson.Result) (wire.Prompt, *apierr.Error) {
	var pr wire.Prompt
	if !msgs.Exists() {
		return pr, apierr.Param(apierr.InvalidRequest, "messages", "The 'messages' field is required.")
	}
	if !msgs.IsArray() {
		return pr, apierr.Param(apierr.InvalidRequest, "messages", "The 'messages' field must be an array.")
	}
	var err *apierr.Error
	i := 0
	wire.ForEach(msgs, func(m wire.Object) bool { // its fields found without walking its content again
		at := "messages[" + strconv.Itoa(i) + "]"
		i++
		if !m.IsObject() {
			err = apierr.Param(apierr.InvalidRequest, at, "Each message must be an object.")
			return false
		}
		role := m.Get("role")
		if role.Type != gjson.String || !chatRoles[role.Str] {
			err = apierr.Param(apierr.InvalidRequest, at+".role",
				"The message role must be one of developer, system, user, assistant, tool.")
			return false
		}
		if err = callFields(m, at); err != nil {
			return false
		}
		c := m.Get("content")
		switch {
		case !c.Exists() && role.Str == "assistant" && calls(m):
			// OpenAI's own rule: an assistant message's content is required unless it
			// calls tools (tool_calls) or a function (function_call). The official SDKs
			// omit it in the assistant turn an agent loop sends back.
		case !c.Exists():
			err = apierr.Param(apierr.InvalidRequest, at+".content", "The message content is required.")
			return false
		case c.Type == gjson.Null:
		case c.Type == gjson.String:
			pr.Texts = append(pr.Texts, c.Str)
		case c.IsArray():
			j := 0
			wire.ForEach(c, func(part wire.Object) bool {
				pat := at + ".content[" + strconv.Itoa(j) + "]"
				j++
				var typ string
				if typ, err = wire.ContentPart(part, pat); err != nil {
					return false
				}
				if iu := part.Get("image_url"); iu.Exists() && iu.Type != gjson.String && !iu.IsObject() {
					err = apierr.Param(apierr.InvalidRequest, pat+".image_url", "A content part's 'image_url' must be a string or an object.")
					return false
				}
				chatPart(&pr, typ, part, pat)
				return true
			})
			if err != nil {
				return false
			}
		default:
			err = apierr.Param(apierr.InvalidRequest, at+".content", "The message content must be a string, an array of content parts, or null.")
			return false
		}
		for _, f := range []string{"name", "tool_call_id"} {
			if v := m.Get(f); v.Exists() && v.Type != gjson.Null && v.Type != gjson.String {
				err = apierr.Param(apierr.InvalidRequest, at+"."+f, "The message's '"+f+"' must be a string.")
				return false
			}
		}
		// Every other field of the message (tool_calls, the legacy function_call, name,
		// tool_call_id, …) is billed by a rendering of its JSON.
		pr.JSON = append(pr.JSON, wire.Extras(m, "role", "content")...)
		// An assistant audio reference makes the provider bill audio the request does
		// not carry.
		if a := m.Get("audio"); a.Exists() && a.Type != gjson.Null {
			pr.Unbound(at + ".audio")
		}
		pr.Messages++
		return true
	})
	if err != nil {
		return pr, err
	}
	if pr.Messages == 0 {
		return pr, apierr.Param(apierr.InvalidRequest, "messages", "The 'messages' field must hold at least one message.")
	}
	return pr, nil
}

// callFields checks the types of a message's calls: tool_calls an array, the legacy
// function_call an object (null counts as absent for both).
func callFields(m wire.Object, at string) *apierr.Error {
	if tc := m.Get("tool_calls"); tc.Exists() && tc.Type != gjson.Null && !tc.IsArray() {
		return apierr.Param(apierr.InvalidRequest, at+".tool_calls", "The message's 'tool_calls' must be an array.")
	}
	if fc := m.Get("function_call"); fc.Exists() && fc.Type != gjson.Null && !fc.IsObject() {
		return apierr.Param(apierr.InvalidRequest, at+".function_call", "The message's 'function_call' must be an object.")
	}
	return nil
}

// calls reports whether a message (its call fields checked by callFields) calls a tool
// or a function: a non-empty tool_calls, or a function_call.
func calls(m wire.Object) bool {
	some := false
	if tc := m.Get("tool_calls"); tc.IsArray() {
		tc.ForEach(func(_, _ gjson.Result) bool { some = true; return false })
	}
	return some || m.Get("function_call").IsObject()
}

// chatPart adds one validated content part at param to pr by its kind: text and refusal
// as text; images; input audio by its decoded size; a file by its bytes as a document, by
// file id unbounded; any other part as an image and its JSON (an upper bound of both).
func chatPart(pr *wire.Prompt, typ string, part wire.Object, param string) {
	switch typ {
	case "text", "refusal":
		pr.Texts = append(pr.Texts, part.Get("text").Str, part.Get("refusal").Str)
	case "image_url":
		pr.Images++
	case "input_audio":
		pr.AudioBytes += wire.Base64Size(part.Get("input_audio.data").Str)
	case "file":
		fileData(pr, wire.Members(part.Get("file")), param+".file")
	default:
		pr.Images++
		pr.JSON = append(pr.JSON, part.Raw)
	}
}

// fileData adds a file object f (at param) to pr: by its bytes (file_data) a document;
// otherwise (file_id, file_url) it cannot be sized, and is unbounded.
func fileData(pr *wire.Prompt, f wire.Object, param string) {
	if d := f.Get("file_data"); d.Type == gjson.String && d.Str != "" {
		pr.Documents = append(pr.Documents, wire.Document{Param: param + ".file_data", Data: d.Str})
		return
	}
	for _, k := range []string{"file_id", "file_url"} {
		if f.Get(k).Exists() {
			pr.Unbound(param + "." + k)
			return
		}
	}
	pr.Unbound(param)
}
