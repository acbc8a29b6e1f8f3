package openai

import (
	"unicode/utf8"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/wire"
	"github.com/tidwall/gjson"
)

// ParseEmbeddings validates an embeddings request body (spec section 4.5): input is a
// non-empty string, a non-empty array of strings, a non-empty array of token ids
// (integers >= 0), or a non-empty array of non-empty token arrays. Strings go to the
// prompt's texts (counted by the tokenizer, no message framing); token arrays count by
// their length in KnownTokens.
func ParseEmbeddings(body []byte) (wire.Parsed, *apierr.Error) {
	root, p, err := wire.Begin(body)
	if err != nil {
		return p, err
	}
	bad := func(msg string) (wire.Parsed, *apierr.Error) {
		return p, apierr.Param(apierr.InvalidRequest, "input", msg)
	}
	const shape = "The 'input' field must be a non-empty string, an array of strings, an array of token ids, or an array of token arrays."
	in := root.Get("input")
	switch {
	case !in.Exists() || in.Type == gjson.Null:
		return bad("The 'input' field is required.")
	case in.Type == gjson.String:
		if in.Str == "" {
			return bad("The 'input' field must not be empty.")
		}
		p.Prompt.Texts = []string{in.Str}
	case in.IsArray():
		items := in.Array()
		if len(items) == 0 {
			return bad("The 'input' field must not be empty.")
		}
		switch first := items[0]; {
		case first.Type == gjson.String:
			for _, it := range items {
				if it.Type != gjson.String || it.Str == "" {
					return bad(shape)
				}
				p.Prompt.Texts = append(p.Prompt.Texts, it.Str)
			}
		case first.Type == gjson.Number:
			if !tokenIDs(items) {
				return bad(shape)
			}
			p.KnownTokens = int64(len(items))
		case first.IsArray():
			for _, it := range items {
				ids := it.Array()
				if !it.IsArray() || len(ids) == 0 || !tokenIDs(ids) {
					return bad(shape)
				}
				p.KnownTokens += int64(len(ids))
			}
		default:
			return bad(shape)
		}
	default:
		return bad(shape)
	}
	if e := root.Get("encoding_format"); e.Exists() && e.Type != gjson.Null && (e.Type != gjson.String || (e.Str != "float" && e.Str != "base64")) {
		return p, apierr.Param(apierr.InvalidRequest, "encoding_format", "The 'encoding_format' field must be 'float' or 'base64'.")
	}
	if d := root.Get("dimensions"); d.Exists() && d.Type != gjson.Null {
		if d.Type != gjson.Number || !wire.IsIntegerLiteral(d.Raw) || d.Int() <= 0 {
			return p, apierr.Param(apierr.InvalidRequest, "dimensions", "The 'dimensions' field must be an integer greater than 0.")
		}
	}
	if _, err := wire.OptionalString(root, "user"); err != nil {
		return p, err
	}
	if err := wire.NoStream(root, "Embeddings"); err != nil {
		return p, err
	}
	return p, nil
}

// tokenIDs reports whether every item is a token id: an integer literal >= 0.
func tokenIDs(items []gjson.Result) bool {
	for _, it := range items {
		if it.Type != gjson.Number || !wire.IsIntegerLiteral(it.Raw) || it.Raw[0] == '-' {
			return false
		}
	}
	return true
}

// ParseMultimodalEmbeddings reads a multimodal embeddings body: its shapes are the
// upstream's, so only the model rule, a present input, and the stream flag (refused)
// are checked. The hold is estimated from every string under a "text" member (or a
// plain string item) and every other object part of input as one media part.
func ParseMultimodalEmbeddings(body []byte) (wire.Parsed, *apierr.Error) {
	root, p, err := wire.Begin(body)
	if err != nil {
		return p, err
	}
	in := root.Get("input")
	if !in.Exists() || in.Type == gjson.Null || (in.IsArray() && len(in.Array()) == 0) || (in.Type == gjson.String && in.Str == "") {
		return p, apierr.Param(apierr.InvalidRequest, "input", "The 'input' field is required and must not be empty.")
	}
	var walk func(v gjson.Result)
	walk = func(v gjson.Result) {
		switch {
		case v.Type == gjson.String:
			p.Prompt.Texts = append(p.Prompt.Texts, v.Str)
		case v.IsArray():
			v.ForEach(func(_, e gjson.Result) bool { walk(e); return true })
		case v.IsObject():
			if t := v.Get("text"); t.Type == gjson.String {
				p.Prompt.Texts = append(p.Prompt.Texts, t.Str)
			} else if c := v.Get("content"); c.Exists() {
				walk(c)
			} else {
				p.Prompt.Images++
			}
		}
	}
	walk(in)
	if err := wire.NoStream(root, "Embeddings"); err != nil {
		return p, err
	}
	return p, nil
}

// speechFormats are the accepted response_format values.
var speechFormats = map[string]bool{"mp3": true, "opus": true, "aac": true, "flac": true, "wav": true, "pcm": true}

// ParseSpeech validates a speech request body (spec section 4.6). Units is the input's
// length in Unicode code points (the billed unit); Voice is checked against the model's
// voices by the caller, once the model is known.
func ParseSpeech(body []byte) (wire.Parsed, *apierr.Error) {
	root, p, err := wire.Begin(body)
	if err != nil {
		return p, err
	}
	in, err := wire.RequiredText(root, "input")
	if err != nil {
		return p, err
	}
	p.Units = int64(utf8.RuneCountInString(in))
	if p.Voice, err = wire.RequiredText(root, "voice"); err != nil {
		return p, err
	}
	if f := root.Get("response_format"); f.Exists() && f.Type != gjson.Null && (f.Type != gjson.String || !speechFormats[f.Str]) {
		return p, apierr.Param(apierr.InvalidRequest, "response_format", "The 'response_format' field must be one of mp3, opus, aac, flac, wav, pcm.")
	}
	if s := root.Get("speed"); s.Exists() && s.Type != gjson.Null && (s.Type != gjson.Number || s.Num <= 0) {
		return p, apierr.Param(apierr.InvalidRequest, "speed", "The 'speed' field must be a number greater than 0.")
	}
	if s := root.Get("stream_format"); s.Exists() && s.Type != gjson.Null && (s.Type != gjson.String || s.Str != "audio") {
		// Server-sent speech events would need a rewrite this gateway does not make.
		return p, apierr.Param(apierr.InvalidRequest, "stream_format", "Only the 'audio' stream format is supported.")
	}
	return p, nil
}

// ParseImages validates an image generation request body (spec section 4.7): one image
// per request (Units 1).
func ParseImages(body []byte) (wire.Parsed, *apierr.Error) {
	root, p, err := wire.Begin(body)
	if err != nil {
		return p, err
	}
	if _, err := wire.RequiredText(root, "prompt"); err != nil {
		return p, err
	}
	if err := wire.OnlyOne(root, "The 'n' field only accepts the value 1: one image is generated and billed per request."); err != nil {
		return p, err
	}
	if f := root.Get("response_format"); f.Exists() && f.Type != gjson.Null && (f.Type != gjson.String || (f.Str != "url" && f.Str != "b64_json")) {
		return p, apierr.Param(apierr.InvalidRequest, "response_format", "The 'response_format' field must be 'url' or 'b64_json'.")
	}
	for _, f := range []string{"size", "quality", "style", "user"} {
		if _, err := wire.OptionalString(root, f); err != nil {
			return p, err
		}
	}
	if err := wire.NoStream(root, "Image generation"); err != nil {
		return p, err
	}
	p.Units = 1
	return p, nil
}
