package wire

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/tidwall/gjson"
)

// The request body's scanner. A chat request is mostly the conversation's strings, and
// gjson reads them a byte at a time, once to validate the body, once more for every
// walk of an object or array that holds them (ForEach, Get) and once to find where a
// string value ends: a 33 KB conversation was read about six times over. Here a string
// is read eight bytes at a time (one word: its quotes, backslashes and control bytes
// found together), and the body is validated and its top-level members indexed in one
// pass; an object or array of a valid body is walked by skipping its values.
//
// extproc/response has a scanner of the same shape for answers (stringEnd, valueEnd,
// containerEnd in its jsonscan.go), tuned for the short strings of SSE chunks (a string of
// up to seven bytes ends in one word) where this one is tuned for long ones (the standard
// library's vector search). They are two homes for one concept: the next step is one
// scanner here, with both strategies, that response uses too (response already imports
// this package), measured with response's SSE benchmarks and fuzz tests.

// Word-at-a-time search: eight bytes are loaded as one little-endian word; zeroBytes(w ^
// ones*c) marks (with its high bit) every byte of w equal to c, and below(w, n) every
// byte under n (n ≤ 128). A mark can be wrong only above a true one (a borrow carries
// upward), so the lowest mark of either, or of several together, is exact.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func zeroBytes(w uint64) uint64 { return (w - ones) &^ w & highs }

func below(w uint64, n uint64) uint64 { return (w - ones*n) &^ w & highs }

// stringStop returns the offset of the first byte at or after j that ends a run of a
// JSON string's plain bytes — '"', '\\' or a control byte (under 0x20, which a string may
// not hold) — or len(b) when there is none.
func stringStop(b []byte, j int) int {
	for ; j+8 <= len(b); j += 8 {
		w := binary.LittleEndian.Uint64(b[j : j+8])
		if m := zeroBytes(w^(ones*'"')) | zeroBytes(w^(ones*'\\')) | below(w, 0x20); m != 0 {
			return j + bits.TrailingZeros64(m)>>3
		}
	}
	for ; j < len(b); j++ {
		if c := b[j]; c == '"' || c == '\\' || c < 0x20 {
			return j
		}
	}
	return len(b)
}

// StringEnd returns the offset just past the closing quote of the string whose opening
// quote is at b[i] (the first '"' not escaped by a backslash), and whether the string
// holds an escape; end is -1 when the string does not end. It does not check the
// string's bytes or escapes (validString does).
func StringEnd(b []byte, i int) (end int, escaped bool) {
	j := i + 1
	for {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return -1, escaped
		}
		q += j
		e := bytes.IndexByte(b[j:q], '\\')
		if e < 0 {
			return q + 1, escaped
		}
		// An escape before the quote: skip the escaped byte and look again from after it
		// (the quote found stays the next one unless it was the escaped byte).
		escaped = true
		j += e + 2
		for j <= q {
			e = bytes.IndexByte(b[j:q], '\\')
			if e < 0 {
				return q + 1, true
			}
			j += e + 2
		}
		if j > len(b) {
			return -1, true
		}
	}
}

// validString checks the string whose opening quote is at b[i] (RFC 8259: no control
// byte, only the defined escapes) and returns the offset past its closing quote and
// whether it holds an escape; ok is false when it is not a valid string.
func validString(b []byte, i int) (end int, escaped, ok bool) {
	j := i + 1
	for {
		j = stringStop(b, j)
		if j >= len(b) {
			return 0, escaped, false
		}
		switch b[j] {
		case '"':
			return j + 1, escaped, true
		case '\\':
			escaped = true
			if j+1 >= len(b) {
				return 0, true, false
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) || !isHex(b[j+5]) {
					return 0, true, false
				}
				j += 6
			default:
				return 0, true, false
			}
		default: // a control byte
			return 0, escaped, false
		}
	}
}

func isHex(c byte) bool { return c-'0' < 10 || (c|0x20)-'a' < 6 }

func isDigit(c byte) bool { return c-'0' < 10 }

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// validNumber checks the number at b[i] (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)
// and returns the offset past it.
func validNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && isDigit(b[i]):
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, true
}

// span is where one top-level member is in the body: its key's quotes at ks and ke-1, its
// value from vs to ve; kEsc and vEsc: the key, or a string value, holds an escape.
type span struct {
	ks, ke, vs, ve int
	kEsc, vEsc     bool
}

// scanBody reports whether b is one JSON value with nothing but whitespace around it
// (RFC 8259's grammar: what gjson.ValidBytes and encoding/json.Valid accept), and when
// that value is an object it appends where each of its members is to top. It keeps a
// stack of the open containers, one byte each, and no recursion.
func scanBody(b []byte, top []span) ([]span, bool) {
	var stackBuf [64]byte
	stack := stackBuf[:0]
	var cur span // the root object's current member
	// inRoot: the value read now is a member of the root object.
	inRoot := func() bool { return len(stack) == 1 && stack[0] == '{' }
	i := skipSpace(b, 0)
	// key reads an object member's key and colon at b[i] and leaves i at its value.
	key := func() bool {
		j, k, ok := memberKey(b, i)
		if ok && inRoot() {
			cur = k
		}
		i = j
		return ok
	}
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return top, false
		}
		switch c := b[i]; c {
		case '{', '[':
			j := skipSpace(b, i+1)
			if j < len(b) && b[j] == c+2 { // '}' and ']' follow '{' and '[' by two
				i = j + 1
				break
			}
			stack = append(stack, c)
			i = j
			if c == '{' && !key() {
				return top, false
			}
			continue
		case '"':
			end, esc, ok := validString(b, i)
			if !ok {
				return top, false
			}
			if inRoot() {
				cur.vEsc = esc
			}
			i = end
		case 't', 'f', 'n':
			lit := "null"
			if c == 't' {
				lit = "true"
			} else if c == 'f' {
				lit = "false"
			}
			if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
				return top, false
			}
			i += len(lit)
		default:
			var ok bool
			if i, ok = validNumber(b, i); !ok {
				return top, false
			}
		}
		// A value ended at i: close the containers it ends, then go on to the next value.
		for {
			if inRoot() {
				cur.ve = i
				top = append(top, cur)
			}
			i = skipSpace(b, i)
			if len(stack) == 0 {
				return top, i == len(b)
			}
			if i >= len(b) {
				return top, false
			}
			open := stack[len(stack)-1]
			if b[i] == open+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return top, false
			}
			i = skipSpace(b, i+1)
			if open == '{' && !key() {
				return top, false
			}
			break
		}
	}
}

// memberKey reads an object member's key and colon at b[i] and returns where its value
// starts, with the key's place (the value's start in vs).
func memberKey(b []byte, i int) (int, span, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, span{}, false
	}
	end, esc, ok := validString(b, i)
	if !ok {
		return 0, span{}, false
	}
	j := skipSpace(b, end)
	if j >= len(b) || b[j] != ':' {
		return 0, span{}, false
	}
	j = skipSpace(b, j+1)
	return j, span{ks: i, ke: end, kEsc: esc, vs: j}, true
}

// valueEnd returns the end of the value at b[i] of valid JSON, and whether a string value
// holds an escape; end is -1 where b is not what it should be (the caller falls back).
func valueEnd(b []byte, i int) (end int, escaped bool) {
	if i >= len(b) {
		return -1, false
	}
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); {
			switch b[j] {
			case '"':
				e, _ := StringEnd(b, j)
				if e < 0 {
					return -1, false
				}
				j = e
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, false
				}
			}
			j++
		}
		return -1, false
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	if j == i {
		return -1, false
	}
	return j, false
}

// result is the gjson value of raw (one JSON value of valid JSON) at offset index: a
// string without escapes and a container are made here, without reading them again;
// anything else is gjson's Parse.
func result(raw string, escaped bool, index int) gjson.Result {
	var r gjson.Result
	switch raw[0] {
	case '"':
		if escaped {
			r = gjson.Parse(raw)
		} else {
			r = gjson.Result{Type: gjson.String, Raw: raw, Str: raw[1 : len(raw)-1]}
		}
	case '{', '[':
		r = gjson.Result{Type: gjson.JSON, Raw: raw}
	default:
		r = gjson.Parse(raw)
	}
	r.Index = index
	return r
}

// ForEach is v.ForEach(fn) with each element as Members makes it and the keys left
// out: for an array, fn is called with each element in order until it returns false.
// Each element is found by skipping, not parsing, the ones before it, and an object's
// members are indexed (when it has IndexBytes or more) in the same walk that finds its
// end. v is of a body Root accepted; should its bytes not scan, gjson's walk delivers
// the elements not yet delivered. Any other value is gjson's.
func ForEach(v gjson.Result, fn func(e Object) bool) {
	raw := v.Raw
	if !v.IsArray() || len(raw) == 0 || raw[0] != '[' {
		v.ForEach(func(_, e gjson.Result) bool { return fn(Members(e)) })
		return
	}
	b := readOnlyBytes(raw)
	delivered := 0
	// rest: the bytes do not scan after all; gjson delivers the elements not yet delivered.
	rest := func() {
		n := 0
		v.ForEach(func(_, e gjson.Result) bool {
			n++
			return n <= delivered || fn(Members(e))
		})
	}
	var scratch [16]member // an object's members while its size is not known
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == ']' {
		return
	}
	for {
		var e Object
		var end int
		if i < len(b) && b[i] == '{' {
			var ms []member
			var ok bool
			if ms, end, ok = objectAt(raw, b, i, v.Index, scratch[:0]); !ok {
				rest()
				return
			}
			e.Result = gjson.Result{Type: gjson.JSON, Raw: raw[i:end], Index: v.Index + i}
			if end-i >= IndexBytes {
				e.members = append(make([]member, 0, len(ms)), ms...)
			}
		} else {
			var esc bool
			if end, esc = valueEnd(b, i); end < 0 {
				rest()
				return
			}
			e.Result = result(raw[i:end], esc, v.Index+i)
		}
		delivered++
		if !fn(e) {
			return
		}
		i = skipSpace(b, end)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			return
		default:
			rest()
			return
		}
	}
}

// readOnlyBytes is s's bytes without a copy, for the scanner, which only reads them.
func readOnlyBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// readOnlyString is b as a string without a copy, for reading b while nothing writes it.
func readOnlyString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
