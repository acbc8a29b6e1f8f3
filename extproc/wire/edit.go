package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Edits of a request body's top-level members, made by splicing its bytes: every byte
// but the edited values is kept. sjson did the same after walking the body a byte at a
// time to find each member (twice for a streamed chat request: the model, then
// stream_options, absent from most, so past every byte of the conversation), and made a
// copy of the body for each.

// Set is one top-level member to set: its value becomes Value(old), old being its
// current value (nil when the body has none; it is then added before the closing
// brace). Value's ok false fails the edit.
type Set struct {
	Name  string
	Value func(old []byte) (value []byte, ok bool)
}

// To is a Set of name to the JSON value raw, whatever it was.
func To(name string, raw []byte) Set {
	return Set{name, func([]byte) ([]byte, bool) { return raw, true }}
}

// SetMembers returns the JSON object body with each of sets applied (to the first member
// of its name, should it repeat), in one walk of its top-level members and one copy; a
// member added goes before the closing brace, as sjson's SetRawBytes puts it. ok is
// false, and body is returned as it is, when body does not scan as an object (up to the
// last member set, when every set finds its member: the rest is copied unread), a Value
// fails or two sets name the same member. body is one Root accepted, or one the gateway
// wrote.
func SetMembers(body []byte, sets ...Set) (out []byte, ok bool) {
	for n := range sets {
		for _, earlier := range sets[:n] {
			if earlier.Name == sets[n].Name {
				return body, false
			}
		}
	}
	type edit struct {
		s, e int
		v    []byte
	}
	var editBuf [4]edit
	edits := editBuf[:0]
	var doneBuf [4]bool
	done := doneBuf[:0]
	for range sets {
		done = append(done, false)
	}
	left := len(sets)
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return body, false
	}
	raw := readOnlyString(body)
	members, failed := false, false
	end, ok := walkMembers(body, i, func(k span) bool {
		members = true
		name := k.name(raw)
		for n, set := range sets {
			if !done[n] && set.Name == name {
				v, ok := set.Value(body[k.vs:k.ve])
				if !ok {
					failed = true
					return false
				}
				edits = append(edits, edit{k.vs, k.ve, v})
				done[n] = true
				left--
			}
		}
		return left > 0 // every set found: nothing is added, the rest is copied as it is
	})
	if !ok || failed {
		return body, false
	}
	i = end - 1 // the closing brace, when a member is to be added
	// The members not found, added in the order of sets before the closing brace.
	var added []byte
	for n, set := range sets {
		if done[n] {
			continue
		}
		v, ok := set.Value(nil)
		if !ok {
			return body, false
		}
		if members || len(added) > 0 {
			added = append(added, ',')
		}
		q, err := AppendQuote(added, set.Name)
		if err != nil {
			return body, false
		}
		added = append(append(q, ':'), v...)
	}
	if len(added) > 0 {
		edits = append(edits, edit{i, i, added})
	}
	size := len(body)
	for _, e := range edits {
		size += len(e.v) - (e.e - e.s)
	}
	out = make([]byte, 0, size)
	at := 0
	for _, e := range edits { // in body order: found members in walk order, then the brace
		out = append(append(out, body[at:e.s]...), e.v...)
		at = e.e
	}
	return append(out, body[at:]...), true
}

// SetMember is SetMembers(body, To(name, raw)).
func SetMember(body []byte, name string, raw []byte) ([]byte, bool) {
	return SetMembers(body, To(name, raw))
}

// SetModel is the Set of the top-level "model" to the string model.
func SetModel(model string) (Set, error) {
	q, err := AppendQuote(nil, model)
	if err != nil {
		return Set{}, err
	}
	return To("model", q), nil
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
