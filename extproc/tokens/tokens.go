// Package tokens counts prompt tokens locally and turns counts into the maximum
// estimated cost of a request.
//
// Counting uses tiktoken's o200k_base vocabulary, read from tiktoken-go-loader's
// embedded files (no network at start), and tiktoken's pre-token pattern and byte-pair
// merge, written here (pretoken.go, vocab.go) because tiktoken-go runs the pattern on a
// backtracking regular-expression engine at ≈4.4 MB/s (a 10 KB prompt: ≈2.2 ms of CPU and
// ≈1 MB of garbage) and keeps the vocabulary in maps the garbage collector marks on every
// cycle. tiktoken-go stays the reference the tests compare every count with. The
// vocabulary is loaded once by New; a Counter is then safe for concurrent use, and
// remembers the counts of long texts, which come back with every request (system prompts,
// tool definitions, a conversation's earlier turns: cache.go).
//
// Estimates are upper bounds, not predictions: every part of a request a provider
// bills is counted, each kind with its own bound (wire.Prompt lists the kinds):
//
//   - Text (message contents, text parts, system): o200k_base tokens. Upstream models
//     use other vocabularies (Anthropic's, older OpenAI ones), whose counts for the same
//     text differ from o200k_base by up to roughly 10% on ordinary text, hence the
//     margin below.
//   - JSON (tool and function definitions, response_format / text.format schemas, tool
//     calls, and every top-level field the parser does not walk): providers bill a
//     rendering of it, never more text than the JSON itself carries; it counts as the
//     larger of its o200k_base tokens and one token per 4 bytes (JSONBytesPerToken), so
//     a JSON of long runs that one vocabulary merges well still counts by its size.
//   - Framing: 4 tokens per message and 3 for the reply priming (OpenAI's documented
//     overhead); ToolsPrompt when the request offers tools (Anthropic adds a tool-use
//     system prompt of up to 530 tokens, depending on the model and tool_choice).
//   - Images: ImageTokens each, whatever the source and size. OpenAI's rule for
//     high detail (85 + 170 per 512-px tile after scaling into 2048×2048 and the short
//     side to 768) peaks at 1,445; Anthropic's (w×h)/750 after resizing peaks near
//     1,600. Models whose image tokens are multiplied for pricing (gpt-4o-mini) are not
//     covered and must not be put behind a token-priced catalog entry.
//   - Audio: one token per AudioBytesPerToken decoded bytes: 10 tokens per second of
//     audio (OpenAI's audio input rate) at any bitrate of 4 kbit/s or more.
//   - Documents by bytes (PDFs): PageTokens per page, Anthropic's published per-page
//     rule (the page's text, 1,500–3,000 tokens, plus the page as an image), which
//     OpenAI's file inputs follow too (each page's extracted text and its image). The
//     pages are counted from the file's bytes at admission (wire.Document.Pages), so
//     the bound grows with the document: a flat bound would either hold a short
//     document at a large multiple of its cost or charge a long one a fraction of its
//     bill. A document by URL or file id cannot be sized before the provider fetches
//     it: the parsers mark it unbounded and the request is refused as
//     pricing_unavailable, as is a document whose pages cannot be counted.
//   - Output: the output limit, plus what is billed as output without being limited by
//     it: chat prediction content (OpenAI bills rejected prediction tokens as output),
//     counted as JSON with the margin.
//
// The estimate of the input is
//
//	ceil(1.1 × (text + JSON + framing + tools prompt)) + 64 + media bounds
//
// where the 64 flat tokens cover framing that is not text (role markers of other
// vocabularies). count_tokens uses Count without the margin.
//
// It depends on tiktoken-go-loader's files and the wire package only (tiktoken-go in
// tests).
package tokens

import (
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/llmgw/gateway/extproc/wire"
)

const (
	// PerMessage is the framing overhead of one message.
	PerMessage = 4
	// ReplyPriming is the overhead of the assistant reply's start.
	ReplyPriming = 3
	// MarginFlat is added to every estimate.
	MarginFlat = 64
	// ToolsPrompt is the tool-use system prompt a provider adds when tools are offered.
	ToolsPrompt = 600
	// JSONBytesPerToken: a JSON part counts at least one token per this many bytes.
	JSONBytesPerToken = 4
	// ImageTokens is the upper bound of one image part.
	ImageTokens = 2000
	// AudioBytesPerToken: inline audio counts one token per this many decoded bytes.
	AudioBytesPerToken = 50
	// PageText and PageImage are one document page's text and image tokens.
	PageText, PageImage = 3000, 1600
	// PageTokens is the upper bound of one page of a document sent by its bytes.
	PageTokens = PageText + PageImage
)

// The vocabulary is read once per process (≈8 MB), however many Counters there are.
var (
	vocabOnce sync.Once
	o200k     *vocab
	o200kErr  error
)

// Counter counts tokens with one vocabulary. Safe for concurrent use.
type Counter struct {
	vocab *vocab
	cache *countCache // texts of CachedBytes or more
}

// New loads the o200k_base vocabulary from the embedded offline loader.
func New() (*Counter, error) {
	vocabOnce.Do(func() { o200k, o200kErr = loadVocab("o200k_base") })
	if o200kErr != nil {
		return nil, fmt.Errorf("tokens: load o200k_base: %w", o200kErr)
	}
	return &Counter{vocab: o200k, cache: newCountCache()}, nil
}

// MaxRun is the longest pre-token merged whole. BPE merging is quadratic in the length of
// one pre-token, so a client could make a single 2 MiB word (or run of spaces) cost
// minutes of CPU; a longer pre-token is merged in MaxRun-byte parts (cut at rune
// boundaries) and counted part by part. Text without such runs counts exactly as
// tiktoken does; a cut run counts about as many tokens as whole (no merge crosses a cut:
// each part ends as the whole would at the cut, give or take the tokens the cut splits),
// within the estimate's margin.
const MaxRun = 256

// Text counts the tokens of s. Special-token text is counted as ordinary text. Its cost
// is linear in len(s) (see MaxRun); a text of CachedBytes or more counted recently costs
// two hashes of it.
func (c *Counter) Text(s string) int {
	if len(s) >= CachedBytes {
		return c.cache.count(s, c.text)
	}
	return c.text(s)
}

// text counts s's tokens: its pre-tokens (pieceEnd), each merged in parts of at most
// MaxRun bytes.
func (c *Counter) text(s string) int {
	if s == "" {
		return 0
	}
	if !utf8.ValidString(s) {
		// As tiktoken-go counts it: every byte that is not UTF-8 is U+FFFD.
		s = string([]rune(s))
	}
	n := 0
	for p := 0; p < len(s); {
		e := pieceEnd(s, p)
		for p < e {
			q := p + cutAt(s[p:e])
			n += c.vocab.countWord(s[p:q], wordAt(s, p, q))
			p = q
		}
	}
	return n
}

// cutAt is where the first part of w ends when w is counted in parts of at most MaxRun
// bytes: len(w) if it is short enough, else the last rune start at or before MaxRun
// (MaxRun itself when w is not UTF-8 there).
func cutAt(w string) int {
	if len(w) <= MaxRun {
		return len(w)
	}
	cut := MaxRun
	for cut > 0 && !utf8.RuneStart(w[cut]) {
		cut--
	}
	if cut == 0 {
		cut = MaxRun
	}
	return cut
}

// JSON is the bound of one JSON part: its o200k_base tokens, and at least one token per
// JSONBytesPerToken bytes.
func (c *Counter) JSON(s string) int64 {
	return max(int64(c.Text(s)), jsonFloor(s))
}

// jsonFloor is the least a JSON part counts: one token per JSONBytesPerToken bytes.
func jsonFloor(s string) int64 {
	return (int64(len(s)) + JSONBytesPerToken - 1) / JSONBytesPerToken
}

// Tally is a prompt's two counts, from one pass of the tokenizer over its texts and
// JSON. Bound is the plain count: text and JSON tokens (JSON at least one token per
// JSONBytesPerToken bytes), the per-message framing, the reply priming and the tools
// prompt, with media parts at their bounds (Media), and no margin. Known is the part the
// gateway counts as the provider does: text and JSON by the tokenizer alone and the
// message framing; no tools prompt, no media, no margin, no bytes floor. Known is what a
// request that ended early is charged for its prompt (the settlement policy), where
// Bound's bounds would overcharge; it never exceeds Bound.
type Tally struct {
	Bound, Known int64
}

// Tally counts p once (the tokenizer is most of a request's own CPU: a request needs
// both counts, so it never runs twice).
func (c *Counter) Tally(p wire.Prompt) Tally {
	var text, floor int64 // floor: what the JSON bytes floor adds above the tokenizer
	for _, t := range p.Texts {
		text += int64(c.Text(t))
	}
	for _, j := range p.JSON {
		n := int64(c.Text(j))
		text += n
		floor += max(0, jsonFloor(j)-n)
	}
	known := text + int64(p.Messages)*PerMessage + ReplyPriming
	bound := known + floor + Media(p)
	if p.Tools {
		bound += ToolsPrompt
	}
	return Tally{Bound: bound, Known: known}
}

// Count is Tally's Bound.
func (c *Counter) Count(p wire.Prompt) int64 { return c.Tally(p).Bound }

// Media is the bound of a prompt's image, audio and document parts.
func Media(p wire.Prompt) int64 {
	audio := (p.AudioBytes + AudioBytesPerToken - 1) / AudioBytesPerToken
	var pages int64
	for _, d := range p.Documents {
		pages += int64(d.Pages)
	}
	return int64(p.Images)*ImageTokens + audio + pages*PageTokens
}

// Estimate is the upper bound of a prompt's input tokens: Count's text, JSON and framing
// times 1.1 rounded up, plus MarginFlat, plus the media bounds.
func (c *Counter) Estimate(p wire.Prompt) int64 {
	return WithMargin(c.Count(p), Media(p))
}

// WithMargin turns a plain Count of a prompt whose media bound is media into its
// Estimate, without counting again.
func WithMargin(count, media int64) int64 {
	return ((count-media)*11+9)/10 + MarginFlat + media
}

// Output is the bound of the output tokens a prompt is billed beyond the output limit:
// its Output parts (chat prediction) counted as JSON, times 1.1 rounded up; 0 when it
// has none.
func (c *Counter) Output(p wire.Prompt) int64 {
	var n int64
	for _, o := range p.Output {
		n += c.JSON(o)
	}
	return (n*11 + 9) / 10
}
