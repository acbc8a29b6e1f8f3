package translate

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	gojson "github.com/goccy/go-json"
	"github.com/tidwall/gjson"
)

// textOf returns the text of a content value that is a string or an array of parts
// whose text parts (of any of types) are joined; ok is false when a part of another
// type is present.
func textOf(v gjson.Result, types ...string) (string, bool) {
	if v.Type == gjson.String {
		return v.Str, true
	}
	if v.Type == gjson.Null || !v.Exists() {
		return "", true
	}
	var b strings.Builder
	ok := true
	v.ForEach(func(_, p gjson.Result) bool {
		t := p.Get("type").Str
		for _, want := range types {
			if t == want {
				b.WriteString(p.Get("text").Str)
				return true
			}
		}
		ok = false
		return false
	})
	return b.String(), ok
}

// floatPtr returns a pointer to v's number, nil when v is absent or null.
func floatPtr(v gjson.Result) *float64 {
	if v.Type != gjson.Number {
		return nil
	}
	f := v.Num
	return &f
}

// boolPtr returns a pointer to v's boolean, nil when absent or null.
func boolPtr(v gjson.Result) *bool {
	if v.Type != gjson.True && v.Type != gjson.False {
		return nil
	}
	b := v.Type == gjson.True
	return &b
}

// rawOrNil returns v's raw JSON, nil when absent or null.
func rawOrNil(v gjson.Result) json.RawMessage {
	if !v.Exists() || v.Type == gjson.Null {
		return nil
	}
	return json.RawMessage(v.Raw)
}

// stopOf reads stop sequences given as a string or an array of strings.
func stopOf(v gjson.Result) []string {
	if v.Type == gjson.String {
		return []string{v.Str}
	}
	var out []string
	v.ForEach(func(_, s gjson.Result) bool {
		out = append(out, s.Str)
		return true
	})
	return out
}

// dataURL splits a data: URL into its media type and base64 data; ok is false when u is
// not a base64 data URL.
func dataURL(u string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found || !strings.HasSuffix(meta, ";base64") {
		return "", "", false
	}
	return strings.TrimSuffix(meta, ";base64"), data, true
}

// imageURL is an image as a URL: its own, or a data URL of its bytes.
func imageURL(im *Image) string {
	if im.URL != "" {
		return im.URL
	}
	return "data:" + im.MediaType + ";base64," + im.Data
}

// imageFromURL is the neutral image of a URL (a data URL's bytes are kept as such).
func imageFromURL(u, detail string) *Image {
	if mt, data, ok := dataURL(u); ok {
		return &Image{MediaType: mt, Data: data, Detail: detail}
	}
	return &Image{URL: u, Detail: detail}
}

// marshal encodes v without HTML escaping, with go-json: encoding/json's encoder writes
// a string a byte at a time, which was ≈45 % of translating a long conversation
// (BenchmarkRequest); go-json writes the same bytes (the package's tests compare every
// value they marshal with encoding/json's, through checkMarshal) ≈2× faster.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := gojson.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n")) // Encode ends with a line end
	if checkMarshal != nil {
		checkMarshal(v, out)
	}
	return out, nil
}

// checkMarshal, when set (by the tests), is shown every value marshal encodes and what
// it made of it.
var checkMarshal func(v any, out []byte)

// at is a JSON path element: name[i].
func at(name string, i int) string { return name + "[" + strconv.Itoa(i) + "]" }

// toolArgsObject returns a tool call's arguments as a JSON object (Anthropic's input):
// empty arguments are {}; anything but an object is refused.
func toolArgsObject(args, param string) (json.RawMessage, error) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}"), nil
	}
	if !gjson.Valid(args) || !gjson.Parse(args).IsObject() {
		return nil, unsupported(param, "A tool call's arguments must be a JSON object to be translated.")
	}
	return json.RawMessage(args), nil
}

// appendString appends s as a JSON string (quotes, backslashes and control characters
// escaped; other bytes, UTF-8 included, as they are; invalid UTF-8 replaced, as
// encoding/json does).
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// toolResultText is a tool result's text, for APIs whose tool results carry text only
// (their tables refuse a tool result with an image).
func toolResultText(res *ToolResult) string {
	text := ""
	for _, c := range res.Content {
		if c.Kind == PartText {
			text += c.Text
		}
	}
	return text
}
