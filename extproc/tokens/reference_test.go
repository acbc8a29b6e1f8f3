package tokens

import (
	"go/build"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// tiktoken-go is the reference: every count here must be its count.
var (
	refOnce sync.Once
	ref     *tiktoken.Tiktoken
	refErr  error
)

func reference(t testing.TB) *tiktoken.Tiktoken {
	t.Helper()
	refOnce.Do(func() {
		tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
		ref, refErr = tiktoken.GetEncoding("o200k_base")
	})
	if refErr != nil {
		t.Fatal(refErr)
	}
	return ref
}

// refPieces is the reference's pre-tokens of s.
func refPieces(t testing.TB, s string) []string {
	r := reference(t)
	var out []string
	for _, tok := range r.EncodeOrdinary(s) {
		out = append(out, r.Decode([]int{tok}))
	}
	return out
}

// samples holds text of every class the pattern tells apart: cases, contractions in
// any case, modifier and other letters, combining marks, numbers of other scripts,
// every kind of space and line end, symbols before line ends and slashes, emoji, and
// bytes that are not UTF-8.
var samples = []string{
	"",
	"hello world",
	"Hello, World! It's JSON's job; they'RE here, we'Ve, I'M, you'LL, he'D, don'T, ISN'T",
	"HTTPServer parseURL iPhone McDonald's XMLHttpRequest ABC'S ABCdef'll",
	"  leading spaces, trailing spaces   ",
	"tabs\tand\t\ttabs \t mixed",
	"line\nbreaks\r\nand\r\r\n\n\nmore  \n  \n\tend\n",
	"numbers 1 12 123 1234 12345 3.14159 -42 1e10 ١٢٣٤ ٤٥ ⅧⅨ ½¾ ²³",
	"symbols !@#$%^&*()_+-=[]{}|;':\",./<>? ~` /path/to/file.go //comment\n/*x*/\r\n",
	" ...\n\n --- ***/\n",
	"naïve café résumé Ångström ﬁ ǅ ǈ ʰʲ ˢ Ⅻ",
	"combining: e\u0301 a\u0308\u0304 \u0301start \u0301\u0301 x\u20dd",
	"中文文本，日本語のテキスト、한국어 텍스트。",
	"Русский текст, Ελληνικά, עברית, العربية, हिन्दी, ไทย",
	"emoji 😀👍🏽 👨‍👩‍👧 🇫🇷 ✈️ ❤️‍🔥",
	"spaces\u00a0nbsp\u2003em\u3000ideographic\u2028line\u2029para\u0085nel\u200bzwsp\ufeffbom\v\f",
	"func main() {\n\tfmt.Println(\"hi\")\n\treturn x+y*2 // done\n}\n",
	"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
	"'s alone 's 'S ' 'x '' ''s trailing'",
	"glued: he'dx we'llx you'rex they'VEy it'sa I'mo don'tt she'Dd we'LLl x'rE1 y'vex z'lly Q'Sx",
	"a\u0301'S B\u0301'LL ʰ'd ǅ'VE",
	"\xff\xfe bad \x80 bytes \xc3 end\xe2\x82",
	"mixed\xffword a\xc3\xa9\xff b",
	"x" + strings.Repeat(" ", 40) + "y" + strings.Repeat("\n", 5) + strings.Repeat(" ", 3),
	strings.Repeat("abc", 30) + " " + strings.Repeat("9", 20),
}

func TestTextMatchesReference(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	r := reference(t)
	for _, s := range samples {
		if got, want := c.text(s), len(r.EncodeOrdinary(s)); got != want {
			t.Errorf("%q: %d tokens, tiktoken-go %d (its tokens: %q)", s, got, want, refPieces(t, s))
		}
	}
}

// TestPiecesMatchReference: the pre-tokens themselves, where the reference's tokens
// show them (each piece of these is one token or splits into tokens that rejoin it).
func TestPiecesMatchReference(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		if !utf8.ValidString(s) {
			continue
		}
		var ours []string
		for p := 0; p < len(s); {
			e := pieceEnd(s, p)
			if e <= p {
				t.Fatalf("%q: no progress at %d", s, p)
			}
			ours = append(ours, s[p:e])
			p = e
		}
		// Every reference token lies inside one of our pieces.
		toks := refPieces(t, s)
		i, used := 0, 0
		for _, tok := range toks {
			if i >= len(ours) {
				t.Fatalf("%q: reference token %q past our pieces %q", s, tok, ours)
			}
			if !strings.HasPrefix(ours[i][used:], tok) {
				t.Errorf("%q: reference token %q not next in our piece %q (pieces %q)", s, tok, ours[i], ours)
				break
			}
			used += len(tok)
			if used == len(ours[i]) {
				i, used = i+1, 0
			}
		}
		_ = c
	}
}

func FuzzTextMatchesReference(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	c, err := New()
	if err != nil {
		f.Fatal(err)
	}
	r := reference(f)
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return
		}
		if got, want := c.text(s), len(r.EncodeOrdinary(s)); got != want {
			t.Errorf("%q: %d tokens, tiktoken-go %d", s, got, want)
		}
	})
}

func BenchmarkText(b *testing.B) {
	c, err := New()
	if err != nil {
		b.Fatal(err)
	}
	prose := strings.Repeat("The quick brown fox jumps over the lazy dog, while 42 engineers debate whether Go's collector (GC) is fast enough.\n", 80)
	for _, tc := range []struct {
		name string
		text func(string) int
	}{
		{"ours", c.text},
		{"ours, counted before", c.Text}, // the count remembered (countCache)
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(prose)))
			b.ReportAllocs()
			for b.Loop() {
				tc.text(prose)
			}
		})
	}
}

// BenchmarkTextSpec counts 100 KB of real English with markup and code (the Go language
// specification in the local Go installation, skipped without one): BenchmarkText's
// repeated sentence flatters whatever remembers or favours its few words.
func BenchmarkTextSpec(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(build.Default.GOROOT, "doc", "go_spec.html"))
	if err != nil || len(data) < 120000 {
		b.Skip("no Go specification to read:", err)
	}
	c, err := New()
	if err != nil {
		b.Fatal(err)
	}
	text := string(data[20000:120000])
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		c.text(text)
	}
}

// TestRandomMatchesReference compares counts on random strings drawn from runes of
// every class the pattern tells apart, where the backtracking cases meet: marks and
// modifier letters between upper and lower case, contraction letters after an
// apostrophe, spaces of every kind before line ends and text.
func TestRandomMatchesReference(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	r := reference(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for range randomRuns() {
		s := randomText(rng)
		if got, want := c.text(s), len(r.EncodeOrdinary(s)); got != want {
			t.Fatalf("%q: %d tokens, tiktoken-go %d (its tokens: %q)", s, got, want, refPieces(t, s))
		}
	}
}

// o200kPattern is tiktoken's pre-token pattern of o200k_base, as tiktoken-go compiles it.
const o200kPattern = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
	`|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
	`|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// TestRandomPiecesMatchPattern compares pieceEnd's pre-tokens with the pattern's matches
// on the same backtracking engine tiktoken-go uses: token counts alone can agree where
// the pieces differ (a merge that splits where the pattern would have).
func TestRandomPiecesMatchPattern(t *testing.T) {
	re := regexp2.MustCompile(o200kPattern, regexp2.None)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range randomRuns() + len(samples) {
		s := randomText(rng)
		if i < len(samples) {
			s = string([]rune(samples[i]))
		}
		runes := []rune(s)
		var want, got []string
		for m, _ := re.FindRunesMatch(runes); m != nil; m, _ = re.FindNextMatch(m) {
			want = append(want, string(runes[m.Index:m.Index+m.Length]))
		}
		for p := 0; p < len(s); {
			e := pieceEnd(s, p)
			got = append(got, s[p:e])
			p = e
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%q: pieces %q, the pattern's %q", s, got, want)
		}
	}
}

// alphabet has runes of every class the pattern tells apart, where its backtracking
// cases meet: marks and modifier and other letters between upper and lower case,
// contraction letters after an apostrophe, spaces of every kind before line ends.
var alphabet = []rune("aZsStTrReEvVlLmMdDx'’ \t\r\n\v/.,!-_#1٣Ⅷ½\u00a0\u2003\u3000\u2028\u0085\u200b" +
	"\u0301\u0308\u20ddʰˢǅǈᾈ中アا😀\ufffd")

// randomText is 1 to 12 runes of alphabet.
func randomText(rng *rand.Rand) string {
	var b strings.Builder
	for range 1 + rng.IntN(12) {
		b.WriteRune(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

func randomRuns() int {
	if testing.Short() {
		return 2000
	}
	return 20000
}

// TestCachedCounts: a long text counts the same from the cache as counted afresh, from
// many goroutines at once and after its shard was emptied.
func TestCachedCounts(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, 3*cacheShards*shardEntries/2) // enough to fill and empty shards
	for i := range texts {
		texts[i] = strconv.Itoa(i) + " " + strings.Repeat("Earlier turns come back with every request. ", CachedBytes/40)
	}
	want := func(s string) int { return c.text(s) }
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(texts); i += 3 {
				for range 2 {
					if got, w := c.Text(texts[i]), want(texts[i]); got != w {
						t.Errorf("text %d: %d tokens from the cache, %d counted", i, got, w)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for i := range c.cache.shards {
		if n := len(c.cache.shards[i].counts); n > shardEntries {
			t.Errorf("shard %d holds %d counts, more than %d", i, n, shardEntries)
		}
	}
	if got, w := c.Text(texts[0]+"x"), want(texts[0]+"x"); got != w {
		t.Errorf("a changed text: %d tokens, %d counted", got, w)
	}
}
