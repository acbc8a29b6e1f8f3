package response

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// A small, allocation-free scanner for the JSON the rewriter touches: it walks the members
// of an object or the elements of an array and reports byte offsets, so that edits are
// made in place and every other byte is kept. It checks structure (strings, brackets,
// separators) but not the grammar of numbers and literals; anything it cannot walk is
// reported as malformed.

// member is one member of a JSON object; offsets are relative to the scanned slice.
type member struct {
	key      []byte // raw key bytes between the quotes (escapes not decoded)
	keyStart int    // offset of the key's opening quote
	valStart int
	valEnd   int
	prevEnd  int  // end of the previous member's value, -1 for the first member
	next     int  // offset of the next member's key (after the comma), or of the closing '}'
	comma    bool // a comma follows this member
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && isSpace(b[i]) {
		i++
	}
	return i
}

// structural marks the bytes that end a run of plain bytes inside a container; valueStop
// the bytes that end a number or literal (which may not start one either).
var structural, valueStop [256]bool

func init() {
	for _, c := range []byte(`"{}[]`) {
		structural[c] = true
	}
	for _, c := range []byte(",}] \t\n\r") {
		valueStop[c] = true
	}
}

// Word-at-a-time search: eight bytes are loaded as one little-endian word, and
// zeroBytes(w ^ ones*c) marks (with its high bit) every byte of w equal to c. A mark can
// be wrong only above a true one (a borrow carries upward), so the lowest mark is exact.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func zeroBytes(w uint64) uint64 { return (w - ones) &^ w & highs }

// quoteOrBackslash returns the offset of the first '"' or '\\' in b at or after j, or
// len(b) when there is none.
func quoteOrBackslash(b []byte, j int) int {
	for ; j+8 <= len(b); j += 8 {
		w := binary.LittleEndian.Uint64(b[j : j+8])
		if m := zeroBytes(w^(ones*'"')) | zeroBytes(w^(ones*'\\')); m != 0 {
			return j + bits.TrailingZeros64(m)>>3
		}
	}
	for ; j < len(b); j++ {
		if c := b[j]; c == '"' || c == '\\' {
			return j
		}
	}
	return len(b)
}

// stringEnd returns the offset just past the string whose opening quote is at b[i]: the
// first '"' not escaped by a backslash (an escaped byte, whatever it is, is skipped).
func stringEnd(b []byte, i int) (int, bool) {
	if e := shortStringEnd(b, i); e > 0 {
		return e, true
	}
	return longStringEnd(b, i)
}

// shortStringEnd is stringEnd of a string of up to seven plain bytes (most keys and many
// values), which ends in the word after its opening quote at b[i]; it returns 0 for any
// other string.
func shortStringEnd(b []byte, i int) int {
	if i+9 > len(b) {
		return 0
	}
	w := binary.LittleEndian.Uint64(b[i+1 : i+9])
	q, bs := zeroBytes(w^(ones*'"')), zeroBytes(w^(ones*'\\'))
	// The first quote, with no backslash before it (marks below a true one are exact).
	if q == 0 || bs&(q&-q-1) != 0 {
		return 0
	}
	return i + 2 + bits.TrailingZeros64(q)>>3
}

func longStringEnd(b []byte, i int) (int, bool) {
	j := i + 1
	for {
		j = quoteOrBackslash(b, j)
		if j >= len(b) {
			return 0, false
		}
		if b[j] == '"' {
			return j + 1, true
		}
		j += 2
	}
}

// valueEnd returns the offset just past the JSON value starting at b[i] (no leading space).
// Strings and literals are crossed here; containers in containerEnd.
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		// Plain words are crossed here, as in memberHead (no call per word); from a
		// backslash, or near the end of b, the string goes the long way.
		j := i + 1
		for j+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[j : j+8])
			q, bs := zeroBytes(w^(ones*'"')), zeroBytes(w^(ones*'\\'))
			if q|bs != 0 {
				if q != 0 && bs&(q&-q-1) == 0 {
					return j + 1 + bits.TrailingZeros64(q)>>3, true
				}
				break
			}
			j += 8
		}
		return longStringEnd(b, j-1) // from b[j] on: the bytes before it are plain
	case c == '{' || c == '[':
		return containerEnd(b, i)
	case valueStop[c] || c == ':':
		return 0, false
	}
	// A number or literal: its grammar is not checked, it ends where a value may.
	j := i + 1
	for j < len(b) && !valueStop[b[j]] {
		j++
	}
	return j, true
}

// containerEnd returns the offset just past the object or array whose opening bracket is
// at b[i]: its brackets are counted (of either kind) and its strings crossed, nothing
// else is checked.
func containerEnd(b []byte, i int) (int, bool) {
	depth := 0
	for j := i; j < len(b); {
		if !structural[b[j]] {
			j++
			continue
		}
		switch b[j] {
		case '"':
			e, ok := stringEnd(b, j)
			if !ok {
				return 0, false
			}
			j = e
			continue
		case '{', '[':
			depth++
		default: // '}', ']'
			depth--
			if depth == 0 {
				return j + 1, true
			}
		}
		j++
	}
	return 0, false
}

// openContainer starts walking the object or array (open and close are its brackets)
// whose opening bracket is at b[i]. It returns the offset of the first member or element
// (more), or just past the closing bracket of an empty one. ok is false when b[i] is not
// open or nothing follows it.
func openContainer(b []byte, i int, open, close byte) (next int, more, ok bool) {
	if i >= len(b) || b[i] != open {
		return 0, false, false
	}
	i = skipSpace(b, i+1)
	if i >= len(b) {
		return 0, false, false
	}
	if b[i] == close {
		return i + 1, false, true
	}
	return i, true, true
}

// nextMember continues a walk after a member or element whose value ends at b[ve]: it
// returns the offset of the next one after a comma (more), or just past the closing
// bracket.
func nextMember(b []byte, ve int, close byte) (next int, more, ok bool) {
	j := skipSpace(b, ve)
	if j >= len(b) {
		return 0, false, false
	}
	switch b[j] {
	case ',':
		j = skipSpace(b, j+1)
		return j, true, j < len(b)
	case close:
		return j + 1, false, true
	}
	return 0, false, false
}

// memberHead reads the key of the member starting at b[i] and its colon; it returns the
// raw key (between the quotes, escapes not decoded) and the offset of the value, which is
// inside b.
func memberHead(b []byte, i int) (key []byte, keyStart, valStart int, ok bool) {
	// The usual member, a key of up to 31 plain bytes then the colon then the value, is
	// read here a word at a time; calls per word and per space would cost more than the
	// reading (every live value is spilled around a call).
	if i+9 <= len(b) && b[i] == '"' {
		j := i + 1
		w := binary.LittleEndian.Uint64(b[j : j+8])
		q, bs := zeroBytes(w^(ones*'"')), zeroBytes(w^(ones*'\\'))
		for q|bs == 0 && j+16 <= len(b) && j < i+25 {
			j += 8
			w = binary.LittleEndian.Uint64(b[j : j+8])
			q, bs = zeroBytes(w^(ones*'"')), zeroBytes(w^(ones*'\\'))
		}
		// The first quote, with no backslash before it (see shortStringEnd).
		if q != 0 && bs&(q&-q-1) == 0 {
			ke := j + 1 + bits.TrailingZeros64(q)>>3
			if ke+1 < len(b) && b[ke] == ':' && !isSpace(b[ke+1]) {
				return b[i+1 : ke-1], i, ke + 1, true
			}
		}
	}
	return memberHeadAny(b, i)
}

// memberHeadAny is memberHead for any member.
func memberHeadAny(b []byte, i int) (key []byte, keyStart, valStart int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, 0, false
	}
	ke := shortStringEnd(b, i)
	if ke == 0 {
		if ke, ok = longStringEnd(b, i); !ok {
			return nil, 0, 0, false
		}
	}
	j := skipSpace(b, ke)
	if j >= len(b) || b[j] != ':' {
		return nil, 0, 0, false
	}
	vs := skipSpace(b, j+1)
	if vs >= len(b) {
		return nil, 0, 0, false
	}
	return b[i+1 : ke-1], i, vs, true
}

// walkObject calls fn for each member of the object in b (surrounding space allowed,
// nothing else after it) until fn returns false. ok is false when b is not a well-formed
// object (as far as it was walked).
func walkObject(b []byte, fn func(m member) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	prevEnd := -1
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		ke, ok := stringEnd(b, i)
		if !ok {
			return false
		}
		m := member{key: b[i+1 : ke-1], keyStart: i, prevEnd: prevEnd}
		j := skipSpace(b, ke)
		if j >= len(b) || b[j] != ':' {
			return false
		}
		m.valStart = skipSpace(b, j+1)
		if m.valEnd, ok = valueEnd(b, m.valStart); !ok {
			return false
		}
		j = skipSpace(b, m.valEnd)
		if j >= len(b) {
			return false
		}
		switch b[j] {
		case ',':
			m.comma = true
			m.next = skipSpace(b, j+1)
			if !fn(m) {
				return true
			}
			prevEnd = m.valEnd
			i = m.next
		case '}':
			m.next = j
			fn(m)
			return skipSpace(b, j+1) == len(b)
		default:
			return false
		}
	}
}

// scanObject appends the members of the object in b to ms.
func scanObject(b []byte, ms []member) ([]member, bool) {
	ok := walkObject(b, func(m member) bool {
		ms = append(ms, m)
		return true
	})
	return ms, ok
}

// lookup returns the offsets in b of the value of the first member named key of the object
// in b.
func lookup(b []byte, key string) (start, end int, found bool) {
	walkObject(b, func(m member) bool {
		if string(m.key) == key {
			start, end, found = m.valStart, m.valEnd, true
			return false
		}
		return true
	})
	return start, end, found
}

// get returns the value of the first member named key of the object in b.
func get(b []byte, key string) ([]byte, bool) {
	s, e, ok := lookup(b, key)
	if !ok {
		return nil, false
	}
	return b[s:e], true
}

// getAll finds the first member named each of keys in the object in b, in one walk: vals[k]
// is what get(b, keys[k]) returns, nil when that finds nothing (vals start nil). Like get,
// it stops where it has found them all: the members after are not read.
func getAll(b []byte, keys []string, vals [][]byte) {
	left := len(keys)
	walkObject(b, func(m member) bool {
		for k, key := range keys {
			if vals[k] == nil && string(m.key) == key {
				vals[k] = b[m.valStart:m.valEnd]
				left--
			}
		}
		return left > 0
	})
}

// getInt returns the integer value of the member named key, if it is one.
func getInt(b []byte, key string) (int64, bool) {
	v, ok := get(b, key)
	if !ok {
		return 0, false
	}
	return jsonInt(v)
}

// find returns the member named key, if any (the last one when repeated).
func find(ms []member, key string) (member, bool) {
	for n := len(ms) - 1; n >= 0; n-- {
		if string(ms[n].key) == key {
			return ms[n], true
		}
	}
	return member{}, false
}

// removal returns the byte range that removes m from its object together with one comma.
func (m member) removal() (start, end int) {
	switch {
	case m.prevEnd >= 0:
		return m.prevEnd, m.valEnd
	case m.comma:
		return m.keyStart, m.next
	default:
		return m.keyStart, m.valEnd
	}
}

// removalAt returns the byte range of b that removes the member whose key starts at
// keyStart and whose value ends at valEnd, together with one comma; prevEnd is the end of
// the previous member's value, -1 for the first member.
func removalAt(b []byte, keyStart, valEnd, prevEnd int) (start, end int) {
	if prevEnd >= 0 {
		return prevEnd, valEnd
	}
	if j := skipSpace(b, valEnd); j < len(b) && b[j] == ',' {
		return keyStart, skipSpace(b, j+1)
	}
	return keyStart, valEnd
}

// eachElement calls fn with the offsets of every element of the array in b[i:j].
func eachElement(b []byte, fn func(start, end int) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return true
	}
	for {
		e, ok := valueEnd(b, i)
		if !ok {
			return false
		}
		if !fn(i, e) {
			return true
		}
		j := skipSpace(b, e)
		if j >= len(b) {
			return false
		}
		switch b[j] {
		case ',':
			i = skipSpace(b, j+1)
		case ']':
			return true
		default:
			return false
		}
	}
}

// isNull reports whether v is the literal null.
func isNull(v []byte) bool { return string(v) == "null" }

// isEmptyArray reports whether v is an array with no elements.
func isEmptyArray(v []byte) bool {
	if len(v) < 2 || v[0] != '[' {
		return false
	}
	return skipSpace(v, 1) == len(v)-1
}

// jsonInt reads a non-negative integer value; ok is false for anything else.
func jsonInt(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// appendUnquoted appends the decoded contents of the JSON string v (with its quotes) to
// dst. ok is false when v is not a string.
func appendUnquoted(dst, v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return dst, false
	}
	s := v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return append(dst, s...), true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if i >= len(s) {
			return dst, false
		}
		switch s[i] {
		case '"', '\\', '/':
			dst = append(dst, s[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, n, ok := hex4(s, i+1)
			if !ok {
				return dst, false
			}
			i = n - 1
			if utf16.IsSurrogate(r) {
				hi := r
				r = utf8.RuneError
				if n+1 < len(s) && s[n] == '\\' && s[n+1] == 'u' {
					if lo, n2, ok2 := hex4(s, n+2); ok2 {
						if d := utf16.DecodeRune(hi, lo); d != utf8.RuneError {
							r, i = d, n2-1
						}
					}
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, false
		}
	}
	return dst, true
}

// hex4 reads four hex digits at s[i:]; it returns the rune and the offset after them.
// (By hand: strconv.ParseUint needed a string made of them and cost ten times more.)
func hex4(s []byte, i int) (rune, int, bool) {
	if i+4 > len(s) {
		return 0, 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, i + 4, true
}
