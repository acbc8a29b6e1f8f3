package wire

import (
	"encoding/base64"
	"slices"
	"strings"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/tidwall/gjson"
)

// The optional-field rules below are written once for every OpenAI-shaped endpoint: each
// checks the top-level field named param, treats an absent or null field as absent, and
// refuses any other shape with invalid_request naming the field, in the OpenAI wording
// ("The 'param' field must be ..."). The Anthropic rules word their messages the
// Anthropic way ("param: must be ...") and keep their own checks.

// Begin applies the rules every JSON endpoint starts with: the body is one JSON object
// (Root) and its "model" is a valid model id (Model). It returns the root and a Parsed
// with Model set.
func Begin(body []byte) (Object, Parsed, *apierr.Error) {
	var p Parsed
	root, err := Root(body)
	if err != nil {
		return root, p, err
	}
	p.Model, err = Model(root)
	return root, p, err
}

// present returns the field named param when it is present and not null.
func present(root Object, param string) (gjson.Result, bool) {
	v := root.Get(param)
	return v, v.Exists() && v.Type != gjson.Null
}

// OptionalString checks that the field named param, when present, is a string, and
// returns it ("" when absent).
func OptionalString(root Object, param string) (string, *apierr.Error) {
	v, ok := present(root, param)
	if !ok {
		return "", nil
	}
	if v.Type != gjson.String {
		return "", apierr.Param(apierr.InvalidRequest, param, "The '"+param+"' field must be a string.")
	}
	return v.Str, nil
}

// OptionalObject checks that the field named param, when present, is a JSON object.
func OptionalObject(root Object, param string) *apierr.Error {
	if v, ok := present(root, param); ok && !v.IsObject() {
		return apierr.Param(apierr.InvalidRequest, param, "The '"+param+"' field must be an object.")
	}
	return nil
}

// OptionalStringOrObject checks that the field named param (tool_choice), when present,
// is a string or a JSON object.
func OptionalStringOrObject(root Object, param string) *apierr.Error {
	if v, ok := present(root, param); ok && v.Type != gjson.String && !v.IsObject() {
		return apierr.Param(apierr.InvalidRequest, param, "The '"+param+"' field must be a string or an object.")
	}
	return nil
}

// OptionalObjectArray checks that the field named param (tools), when present, is an
// array of JSON objects, and returns its raw JSON ("" when absent): the token estimate
// counts tool definitions as text.
func OptionalObjectArray(root Object, param string) (string, *apierr.Error) {
	v, ok := present(root, param)
	if !ok {
		return "", nil
	}
	if !ArrayOf(v, func(e gjson.Result) bool { return e.IsObject() }) {
		return "", apierr.Param(apierr.InvalidRequest, param, "The '"+param+"' field must be an array of objects.")
	}
	return v.Raw, nil
}

// ArrayOf reports whether v is an array whose every element satisfies ok.
func ArrayOf(v gjson.Result, ok func(gjson.Result) bool) bool {
	if !v.IsArray() {
		return false
	}
	all := true
	v.ForEach(func(_, e gjson.Result) bool { all = ok(e); return all })
	return all
}

// OnlyOne checks the optional "n" field: when present it must be a JSON number equal to
// 1 (so 1.0 passes), else invalid_n with msg, which says why the endpoint serves one
// result per request.
func OnlyOne(root Object, msg string) *apierr.Error {
	if n, ok := present(root, "n"); ok && (n.Type != gjson.Number || n.Num != 1) {
		return apierr.Param(apierr.InvalidN, "n", msg)
	}
	return nil
}

// RequiredText reads the required field named param, which must be a non-empty string
// (a speech input, an image prompt, a voice).
func RequiredText(root Object, param string) (string, *apierr.Error) {
	v := root.Get(param)
	if v.Type != gjson.String || v.Str == "" {
		return "", apierr.Param(apierr.InvalidRequest, param, "The '"+param+"' field is required and must be a non-empty string.")
	}
	return v.Str, nil
}

// ContentPart checks what both OpenAI formats (Chat Completions message content and
// Responses input item content) require of the content part part at param (for example
// "messages[0].content[1]"): an object with a string "type", whose "text", when present,
// is a string. It returns the part's type. What each type then means differs between the
// formats and stays with them.
func ContentPart(part Object, param string) (string, *apierr.Error) {
	typ := part.Get("type")
	if !part.IsObject() || typ.Type != gjson.String {
		return "", apierr.Param(apierr.InvalidRequest, param+".type", "Each content part must be an object with a string 'type'.")
	}
	if t := part.Get("text"); t.Exists() && t.Type != gjson.String {
		return "", apierr.Param(apierr.InvalidRequest, param+".text", "A content part's 'text' must be a string.")
	}
	return typ.Str, nil
}

// control are the top-level fields of the formats that steer generation or record
// bookkeeping and are never rendered into the model's input: no provider bills them.
var control = map[string]bool{
	"stream": true, "stream_options": true, "max_tokens": true, "max_completion_tokens": true,
	"max_output_tokens": true, "temperature": true, "top_p": true, "top_k": true, "n": true,
	"seed": true, "presence_penalty": true, "frequency_penalty": true, "logprobs": true,
	"top_logprobs": true, "logit_bias": true, "parallel_tool_calls": true, "store": true,
	"user": true, "metadata": true, "service_tier": true, "stop": true, "stop_sequences": true,
	"reasoning_effort": true, "safety_identifier": true, "prompt_cache_key": true, "inference_geo": true,
}

// Extras returns the raw JSON ("key":value) of every top-level field of root that is
// neither in walked (the fields the format's parser counts itself) nor a control field:
// tools, functions, response_format and text.format schemas, tool_choice, and any field
// the gateway does not know. A provider may bill any of them by a rendering of its JSON,
// so the estimate counts them all as JSON rather than trusting a list of billed fields.
func Extras(root Object, walked ...string) []string {
	var out []string
	root.Each(func(name, key string, v gjson.Result) bool {
		if !control[name] && !slices.Contains(walked, name) {
			out = append(out, key+":"+v.Raw)
		}
		return true
	})
	return out
}

// Base64Size is the decoded size bound of base64 text s, a data URL's payload
// ("data:...;base64,") included: 3 bytes per 4 characters, rounded up.
func Base64Size(s string) int64 {
	return (int64(len(base64Payload(s)))*3 + 3) / 4
}

// Base64Bytes decodes base64 text s (standard alphabet, padding optional), a data URL's
// payload included.
func Base64Bytes(s string) ([]byte, error) {
	return base64.RawStdEncoding.DecodeString(strings.TrimRight(base64Payload(s), "="))
}

// base64Payload is s without a data URL's "data:...;base64," prefix.
func base64Payload(s string) string {
	if i := strings.Index(s, ";base64,"); i >= 0 && strings.HasPrefix(s, "data:") {
		return s[i+len(";base64,"):]
	}
	return s
}
