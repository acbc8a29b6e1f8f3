package wire

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"
)

// Edits of a request body's top-level members, made by splicing its bytes: every byte
// but the edited value is kept. sjson did the same after walking the body a byte at a
// time to find the member (twice for a streamed chat request: the model, then
// stream_options, absent from most, so past every byte of the conversation).

// findMember finds the top-level member name of the JSON object b (the first, should it
// repeat): its value at b[vs:ve] when found, else the offset of the object's closing
// brace in close and whether the object has members. ok is false when b does not scan
// as an object up to the member (b is a body Root accepted, or one the gateway wrote:
// what follows a member found is not read).
func findMember(b []byte, name string) (vs, ve int, found bool, close int, members, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, 0, false, 0, false, false
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] != '}'; {
		k, ok := memberAt(b, i)
		if !ok {
			return 0, 0, false, 0, false, false
		}
		members = true
		key := b[k.ks+1 : k.ke-1]
		if k.kEsc && gjson.ParseBytes(b[k.ks:k.ke]).Str == name || !k.kEsc && string(key) == name {
			return k.vs, k.ve, true, 0, true, true
		}
		i = skipSpace(b, k.ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		} else if i >= len(b) || b[i] != '}' {
			return 0, 0, false, 0, false, false
		}
	}
	if i >= len(b) {
		return 0, 0, false, 0, false, false
	}
	return 0, 0, false, i, members, true
}

// Member returns the value of the top-level member name of the JSON object body (the
// first, should it repeat); ok is false when body does not scan as an object.
func Member(body []byte, name string) (value []byte, found, ok bool) {
	vs, ve, found, _, _, ok := findMember(body, name)
	if !found {
		return nil, false, ok
	}
	return body[vs:ve], true, true
}

// SetMember returns the JSON object body with its top-level member name's value replaced
// by raw (one JSON value), or, when it has no such member, with the member added before
// its closing brace, as sjson's SetRawBytes does. ok is false, and body is returned as
// it is, when body does not scan as an object.
func SetMember(body []byte, name string, raw []byte) (out []byte, ok bool) {
	vs, ve, found, closing, members, ok := findMember(body, name)
	if !ok {
		return body, false
	}
	if found {
		return splice(body, vs, ve, raw), true
	}
	key, err := AppendQuote(make([]byte, 0, len(name)+len(raw)+4), name)
	if err != nil {
		return body, false
	}
	key = append(append(key, ':'), raw...)
	if members {
		key = append([]byte{','}, key...)
	}
	return splice(body, closing, closing, key), true
}

// splice is b with b[s:e] replaced by v, in a new slice.
func splice(b []byte, s, e int, v []byte) []byte {
	out := make([]byte, 0, len(b)-(e-s)+len(v))
	return append(append(append(out, b[:s]...), v...), b[e:]...)
}

// SetModel returns body with its top-level "model" set to the string model: every other
// byte is kept.
func SetModel(body []byte, model string) ([]byte, error) {
	q, err := AppendQuote(nil, model)
	if err != nil {
		return nil, err
	}
	out, ok := SetMember(body, "model", q)
	if !ok {
		return nil, fmt.Errorf("wire: the body is not a JSON object")
	}
	return out, nil
}

// AppendQuote appends s as a JSON string to dst (no HTML escaping: '<', '>' and '&'
// stay as they are).
func AppendQuote(dst []byte, s string) ([]byte, error) {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"'), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("wire: quote %q: %w", s, err)
	}
	return append(dst, bytes.TrimSpace(buf.Bytes())...), nil
}
