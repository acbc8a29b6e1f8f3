// Package tokens counts prompt tokens locally and turns counts into the maximum
// estimated cost of a request.
//
// Counting uses tiktoken's o200k_base vocabulary from the embedded offline loader (no
// network at start). The vocabulary is loaded once by New; a Counter is then safe for
// concurrent use.
//
// Estimates are upper bounds, not predictions. Upstream models use other vocabularies
// (Anthropic's, older OpenAI ones), whose counts for the same text differ from
// o200k_base by up to roughly 10% on ordinary text, so the estimate adds a margin:
//
//	estimate = ceil(1.1 × (text tokens + 4 per message + 3)) + 64 + 2,000 per media part
//
// The 4 tokens per message and 3 for the reply priming are OpenAI's documented framing
// overhead; the 64 flat tokens cover framing that is not text (tool schemas rendered
// differently, role markers of other vocabularies). Images, audio and files are counted
// as a fixed 2,000 tokens per part, above what the providers charge for one image at
// their largest accepted size. count_tokens uses Count without the margin.
//
// It depends on tiktoken-go and the wire package only.
package tokens

import (
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/llmgw/gateway/extproc/wire"
	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

const (
	// PerMessage is the framing overhead of one message.
	PerMessage = 4
	// ReplyPriming is the overhead of the assistant reply's start.
	ReplyPriming = 3
	// MarginFlat is added to every estimate.
	MarginFlat = 64
	// MediaPart is the fixed upper bound of one image, audio or file part.
	MediaPart = 2000
)

var loaderOnce sync.Once

// Counter counts tokens with one vocabulary. Safe for concurrent use.
type Counter struct {
	enc *tiktoken.Tiktoken
}

// New loads the o200k_base vocabulary from the embedded offline loader.
func New() (*Counter, error) {
	loaderOnce.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
	enc, err := tiktoken.GetEncoding("o200k_base")
	if err != nil {
		return nil, fmt.Errorf("tokens: load o200k_base: %w", err)
	}
	return &Counter{enc: enc}, nil
}

// MaxRun is the longest run of non-space bytes encoded in one piece. BPE merging is
// quadratic in the length of one pre-token, so a client could make a single 2 MiB word
// cost minutes of CPU; longer runs are cut into MaxRun-byte pieces (at rune boundaries)
// and counted piece by piece. Text without such runs counts exactly as before; a cut run
// counts at least as many tokens as whole (no merge crosses a cut), so estimates stay
// upper bounds.
const MaxRun = 256

// Text counts the tokens of s. Special-token text is counted as ordinary text. Its cost
// is linear in len(s) (see MaxRun).
func (c *Counter) Text(s string) int {
	n, done, run := 0, 0, -1 // done: s[:done] is counted; run: start of the current word
	for i := 0; i <= len(s); i++ {
		if i < len(s) && !isSpace(s[i]) {
			if run < 0 {
				run = i
			}
			continue
		}
		if run >= 0 && i-run > MaxRun {
			n += c.encode(s[done:run])
			for w := s[run:i]; w != ""; {
				cut := min(MaxRun, len(w))
				for cut < len(w) && cut > 0 && !utf8.RuneStart(w[cut]) {
					cut--
				}
				if cut == 0 { // not UTF-8: cut at the byte limit
					cut = min(MaxRun, len(w))
				}
				n += c.encode(w[:cut])
				w = w[cut:]
			}
			done = i
		}
		run = -1
	}
	return n + c.encode(s[done:])
}

func (c *Counter) encode(s string) int {
	if s == "" {
		return 0
	}
	return len(c.enc.EncodeOrdinary(s))
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// Count is the plain count of a prompt: its text tokens, the per-message framing and
// the reply priming, with media parts at MediaPart each, and no margin.
func (c *Counter) Count(p wire.Prompt) int64 {
	var n int64
	for _, t := range p.Texts {
		n += int64(c.Text(t))
	}
	n += int64(p.Messages)*PerMessage + ReplyPriming
	n += int64(p.Media) * MediaPart
	return n
}

// Estimate is the upper bound of a prompt's input tokens: Count's text and framing
// times 1.1 rounded up, plus MarginFlat, plus MediaPart per media part.
func (c *Counter) Estimate(p wire.Prompt) int64 {
	return WithMargin(c.Count(p), p.Media)
}

// WithMargin turns a plain Count of a prompt with media parts into its Estimate,
// without counting again.
func WithMargin(count int64, media int) int64 {
	m := int64(media) * MediaPart
	return ((count-m)*11+9)/10 + MarginFlat + m
}

// Cost is units × pricePerMillion / 1,000,000 in micro-credits, rounded up. Negative
// inputs count as zero.
func Cost(units, pricePerMillion int64) int64 {
	if units <= 0 || pricePerMillion <= 0 {
		return 0
	}
	// Both factors are far below 2^31 in practice (≤ ~4M tokens, prices ≤ 10^9 micros
	// per million); guard anyway against overflow by splitting the product.
	q, r := units/1_000_000, units%1_000_000
	return q*pricePerMillion + (r*pricePerMillion+999_999)/1_000_000
}
