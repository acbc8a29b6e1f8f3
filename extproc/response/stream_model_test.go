package response

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStreamModelBesideText: the public model's JSON, held in the rewriter beside its
// first text, stays whole however much text a stream delivers, for a short id, one too
// long to be held there and one that needs escapes.
func TestStreamModelBesideText(t *testing.T) {
	for _, model := range []string{"demo-chat", strings.Repeat("m", 63), strings.Repeat("m", 64), strings.Repeat("long-", 30), `é"\`} {
		var text string
		opts := Options{Format: OpenAIChat, PublicModel: model, Stream: true, ClientWantsUsage: true,
			CountTokens: func(s string) int { text += s; return len(s) }}
		rw, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		quoted, _ := json.Marshal(model)
		var want strings.Builder
		for i := range 40 {
			part := strings.Repeat(string(rune('a'+i%26)), i)
			ev := `data: {"id":"x","model":"up","choices":[{"index":0,"delta":{"content":"` + part + `"}}]}` + "\n\n"
			out, err := rw.Write([]byte(ev), false)
			if err != nil {
				t.Fatal(err)
			}
			if w := strings.Replace(ev, `"up"`, string(quoted), 1); string(out) != w {
				t.Fatalf("%q, event %d: got %q, want %q", model, i, out, w)
			}
			want.WriteString(part)
		}
		if _, err := rw.Write(nil, true); err != nil {
			t.Fatal(err)
		}
		if d := rw.Delivered(); text != want.String() || d.OutputTokens != int64(len(text)) {
			t.Fatalf("%q: counted %q (%d tokens)", model, text, d.OutputTokens)
		}
	}
}
