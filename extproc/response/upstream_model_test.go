package response

import (
	"strconv"
	"testing"
)

// FuzzPlainUnquote holds plainUnquote to strconv.Unquote: wherever it answers, Unquote
// accepts the value and gives the same string.
func FuzzPlainUnquote(f *testing.F) {
	for _, s := range []string{`"gpt-4o-2024-08-06"`, `""`, `"a\"b"`, `"a\nb"`, "\"a\nb\"", `"é"`,
		"\"\xff\"", `"a"b"`, `"a`, `'a'`, "\"\t\x01\x7f\"", `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := plainUnquote(raw)
		if !ok {
			return
		}
		if want, err := strconv.Unquote(string(raw)); err != nil || got != want {
			t.Fatalf("%q: plainUnquote %q, Unquote %q, %v", raw, got, want, err)
		}
	})
}

// TestPlainUnquoteTakesModelIDs: the usual model ids take the short way.
func TestPlainUnquoteTakesModelIDs(t *testing.T) {
	for _, s := range []string{`"gpt-4o-2024-08-06"`, `"claude-sonnet-4-5"`, `"a b/c:d"`, `""`} {
		if got, ok := plainUnquote([]byte(s)); !ok || got != s[1:len(s)-1] {
			t.Errorf("%s: %q, %v", s, got, ok)
		}
	}
}
