package tokens

import (
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/wire"
)

func TestCountAndEstimate(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Text("hello world"); got != 2 {
		t.Errorf("Text(hello world) = %d, want 2", got)
	}
	tests := []struct {
		name         string
		p            wire.Prompt
		count, estim int64
	}{
		{name: "empty", p: wire.Prompt{}, count: 3, estim: 4 + 64},
		{name: "one message", p: wire.Prompt{Texts: []string{"hello world"}, Messages: 1}, count: 2 + 4 + 3, estim: 10 + 64},
		{name: "image", p: wire.Prompt{Texts: []string{"hello world"}, Messages: 1, Images: 1}, count: 9 + 2000, estim: 10 + 64 + 2000},
		// A JSON part counts at least one token per 4 bytes: 400 '=' merge into few
		// o200k tokens, but 402 bytes of JSON ("...") count 101.
		{name: "json by size", p: wire.Prompt{JSON: []string{`"` + strings.Repeat("=", 400) + `"`}}, count: 101 + 3, estim: 115 + 64},
		{name: "json by tokens", p: wire.Prompt{JSON: []string{`{"a":1}`}}, count: 5 + 3, estim: 9 + 64},
		{name: "tools prompt", p: wire.Prompt{Tools: true}, count: 3 + ToolsPrompt, estim: 664 + 64},
		{name: "audio by size", p: wire.Prompt{AudioBytes: 16_001}, count: 3 + 321, estim: 4 + 64 + 321},
		// Each page of a document counts PageTokens: a document's bound is its pages'.
		{name: "documents by page", p: wire.Prompt{Documents: []wire.Document{{Pages: 3}, {Pages: 3000}}}, count: 3 + 3003*4600, estim: 4 + 64 + 3003*4600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.Count(tt.p); got != tt.count {
				t.Errorf("Count = %d, want %d", got, tt.count)
			}
			if got := c.Estimate(tt.p); got != tt.estim {
				t.Errorf("Estimate = %d, want %d", got, tt.estim)
			}
		})
	}
}

func TestOutput(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		p    wire.Prompt
		want int64
	}{
		{name: "none", p: wire.Prompt{}, want: 0},
		// 41 bytes → 11 by size; o200k counts more; times 1.1.
		{name: "prediction", p: wire.Prompt{Output: []string{`{"type":"content","content":"a b c d e f"}`}}, want: (c.JSON(`{"type":"content","content":"a b c d e f"}`)*11 + 9) / 10},
		{name: "long run", p: wire.Prompt{Output: []string{strings.Repeat("=", 4000)}}, want: 1100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.Output(tt.p); got != tt.want {
				t.Errorf("Output = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestTextLongRuns checks that pre-tokens longer than MaxRun are merged in parts:
// ordinary text counts as the tokenizer counts it, a cut run counts at
// least as many tokens as whole, and a single 2 MiB word, run of spaces or run of line
// ends (quadratic for BPE as one piece) is counted at all — this test would time out if
// it were not.
func TestTextLongRuns(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ordinary := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200)
	if got, want := c.Text(ordinary), len(reference(t).EncodeOrdinary(ordinary)); got != want {
		t.Errorf("ordinary text: %d tokens, tokenizer says %d", got, want)
	}
	for _, word := range []string{
		strings.Repeat("a", MaxRun+1),
		strings.Repeat("ab1/", 300),
		strings.Repeat("héllo", 100),    // cut at rune boundaries
		strings.Repeat("\xff\x80", 400), // not UTF-8
	} {
		s := "before " + word + " after"
		if got, whole := c.Text(s), len(reference(t).EncodeOrdinary(s)); got < whole {
			t.Errorf("%.20q…: %d tokens cut, %d whole: the estimate must not shrink", word, got, whole)
		}
	}
	for _, huge := range []string{strings.Repeat("a", 2<<20), "x" + strings.Repeat(" ", 2<<20) + "y", "!" + strings.Repeat("\n", 2<<20)} {
		if n := c.Text(huge); n <= 0 || n > len(huge) {
			t.Errorf("2 MiB run %.8q…: %d tokens", huge, n)
		}
	}
}

// TestKnown: what an early end charges for a prompt is its text and JSON as the
// tokenizer counts them and the framing; never the bounds the hold adds for media, the
// tools prompt or the JSON bytes floor.
func TestKnown(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	p := wire.Prompt{
		Texts: []string{"hello world"}, JSON: []string{`{"type":"object"}`}, Messages: 1,
		Images: 3, AudioBytes: 5000, Documents: []wire.Document{{Pages: 2}}, Tools: true,
	}
	text := int64(c.Text("hello world") + c.Text(`{"type":"object"}`))
	if got, want := c.Tally(p).Known, text+PerMessage+ReplyPriming; got != want {
		t.Errorf("Known = %d, want %d (text, JSON by the tokenizer, framing)", got, want)
	}
	if c.Tally(p).Known >= c.Count(p) {
		t.Errorf("Known %d not below Count %d", c.Tally(p).Known, c.Count(p))
	}
	floor := wire.Prompt{JSON: []string{strings.Repeat("=", 4000)}}
	if c.Tally(floor).Known > c.Count(floor) {
		t.Errorf("Known %d above Count %d", c.Tally(floor).Known, c.Count(floor))
	}
}

func TestWordAt(t *testing.T) {
	s := "ab\x00cdéfgh ijklmnop"
	for p := 0; p <= len(s); p++ {
		for q := p; q <= len(s) && q <= p+8; q++ {
			if got, want := wordAt(s, p, q), wordOf(s[p:q]); got != want {
				t.Fatalf("wordAt(%d, %d) = %#x, wordOf %#x", p, q, got, want)
			}
		}
	}
}
