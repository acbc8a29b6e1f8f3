package translate

import (
	"encoding/json"
	"testing"
)

// TestAppendStringDecodesBack: whatever the string, the JSON appendString writes decodes
// to it (invalid UTF-8 to U+FFFD, as encoding/json writes it).
func TestAppendStringDecodesBack(t *testing.T) {
	for _, s := range []string{"", "plain", `quote " and \ backslash`, "new\nline\ttab\rcr", "\x00\x01\x1f",
		"héllo wörld ✓ 🎉", "<script>&</script>", "bad \xff utf8", "\u2028\u2029"} {
		out := appendString(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q → %s: %v", s, out, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("%q → %s decodes to %q, want %q", s, out, back, wantBack)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\\c\n\x00é\xff")
	f.Fuzz(func(t *testing.T, s string) {
		var back, want string
		if err := json.Unmarshal(appendString(nil, s), &back); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		b, _ := json.Marshal(s)
		_ = json.Unmarshal(b, &want)
		if back != want {
			t.Errorf("%q decodes to %q, want %q", s, back, want)
		}
	})
}
