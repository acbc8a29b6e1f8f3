package response

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func TestStringEnd(t *testing.T) {
	tests := []struct {
		name string
		lit  string // a JSON string literal
	}{
		{name: "empty", lit: `""`},
		{name: "short", lit: `"model"`},
		{name: "escaped quote", lit: `"a\"b"`},
		{name: "escaped backslash before the end", lit: `"a\\"`},
		{name: "long plain", lit: `"` + strings.Repeat("x", 100) + `"`},
		{name: "long with escapes everywhere", lit: `"` + strings.Repeat(`ab\"\\\n`, 40) + `"`},
		{name: "escape right at the jump", lit: `"` + strings.Repeat("y", 15) + `\"` + strings.Repeat("z", 30) + `\\"`},
		{name: "unicode", lit: `"caf\u00e9 😀"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s string
			if err := json.Unmarshal([]byte(tt.lit), &s); err != nil {
				t.Fatalf("bad test literal: %v", err)
			}
			in := []byte(tt.lit + `,"next":"x"}`)
			if e, ok := stringEnd(in, 0); !ok || e != len(tt.lit) {
				t.Fatalf("end %d, %v; want %d", e, ok, len(tt.lit))
			}
			got, ok := appendUnquoted(nil, []byte(tt.lit))
			if !ok || string(got) != s {
				t.Fatalf("unquoted %q, want %q", got, s)
			}
		})
	}
}

// FuzzScanObject checks the scanner against encoding/json: every valid object is walked,
// with each member's key and value matching what encoding/json reads.
func FuzzScanObject(f *testing.F) {
	f.Add([]byte(`{"model":"m","choices":[{"delta":{"content":"a\"b"}}],"usage":null}`))
	f.Add([]byte(` { "a" : [1, {"b": "\\"}], "c": true } `))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var want map[string]json.RawMessage
		valid := json.Valid(in) && bytes.HasPrefix(bytes.TrimSpace(in), []byte("{"))
		ms, ok := scanObject(in, nil)
		if !valid {
			return // the scanner is lenient about numbers and literals
		}
		if !ok {
			t.Fatalf("valid object not walked: %q", in)
		}
		if err := json.Unmarshal(in, &want); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, m := range ms {
			var key string
			if err := json.Unmarshal(in[m.keyStart:m.keyStart+len(m.key)+2], &key); err != nil {
				t.Fatalf("key %q: %v", in[m.keyStart:m.keyStart+len(m.key)+2], err)
			}
			v := in[m.valStart:m.valEnd]
			if !json.Valid(v) {
				t.Fatalf("value %q of %q is not JSON", v, key)
			}
			seen[key] = true
			if s, e := m.removal(); s > e || e > len(in) {
				t.Fatalf("removal %d..%d", s, e)
			} else if rest := append(append([]byte{}, in[:s]...), in[e:]...); !json.Valid(rest) {
				t.Fatalf("removing %q leaves %q", key, rest)
			}
		}
		if len(seen) != len(want) {
			t.Fatalf("walked keys %v, encoding/json read %d", seen, len(want))
		}
	})
}

// TestSetSlice: the slice set is the appended one whether or not the append moved it.
func TestSetSlice(t *testing.T) {
	buf := make([]byte, 0, 4)
	setSlice(&buf, append(buf, "abc"...))
	if string(buf) != "abc" || cap(buf) != 4 {
		t.Fatalf("in place: %q cap %d", buf, cap(buf))
	}
	setSlice(&buf, append(buf, "defg"...))
	if string(buf) != "abcdefg" {
		t.Fatalf("moved: %q", buf)
	}
	var none []byte
	setSlice(&none, append(none, none...))
	if none != nil {
		t.Fatalf("nil: %q", none)
	}
}

// TestHex4: four hex digits read by hand as strconv reads them, any byte in any place.
func TestHex4(t *testing.T) {
	var b [4]byte
	for c := 0; c < 256; c++ {
		for pos := range b {
			copy(b[:], "aF09")
			b[pos] = byte(c)
			r, n, ok := hex4(b[:], 0)
			v, err := strconv.ParseUint(string(b[:]), 16, 32)
			if ok != (err == nil) || ok && (r != rune(v) || n != 4) {
				t.Fatalf("%q: got %x %d %v, want %x %v", b, r, n, ok, v, err)
			}
		}
	}
	if _, _, ok := hex4([]byte("abc"), 0); ok {
		t.Fatal("three digits read")
	}
}

// FuzzMemberHead: the member head read a word at a time is the one read the general way,
// at every offset.
func FuzzMemberHead(f *testing.F) {
	f.Add([]byte(`{"index":0,"finish_reason":null,"0123456789abcde":1,"0123456789abcdef":2,"a\"b":3,"k" : 4,"k":` + "\t5}"))
	f.Add([]byte(`"finish_reason":n`))
	f.Add([]byte(`"0123456789abcd":x`))
	f.Add([]byte(`{"completion_tokens_details":{"accepted_prediction_tokens_":0,"0123456789abcdef0123456789abcdef":1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := range b {
			k1, ks1, vs1, ok1 := memberHead(b, i)
			k2, ks2, vs2, ok2 := memberHeadAny(b, i)
			if string(k1) != string(k2) || ks1 != ks2 || vs1 != vs2 || ok1 != ok2 {
				t.Fatalf("%q at %d: got %q %d %d %v, want %q %d %d %v", b, i, k1, ks1, vs1, ok1, k2, ks2, vs2, ok2)
			}
		}
	})
}
