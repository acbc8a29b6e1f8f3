package pricing

import (
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/catalog"
)

// A rate card prices a chat request's usage part by part. The parts are disjoint: a
// token is in exactly one of them, whatever totals the provider's format reports
// (extproc/response reads each format into these parts).
type Part int

const (
	Input        Part = iota // input tokens that are none of the parts below
	CacheRead                // input tokens read from the provider's prompt cache
	CacheWrite               // input tokens written to the cache (5-minute and default writes)
	CacheWrite1h             // input tokens written to the cache for an hour
	AudioInput
	ImageInput
	Output // output tokens that are not audio, reasoning included
	AudioOutput
	numParts
)

// names are the parts' names in the ledger's components (the ledger refuses any other).
var names = [numParts]string{ledger.ComponentInput, ledger.ComponentCacheRead, ledger.ComponentCacheWrite,
	ledger.ComponentCacheWrite1h, ledger.ComponentAudioInput, ledger.ComponentImageInput, ledger.ComponentOutput,
	ledger.ComponentAudioOutput}

func (p Part) String() string { return names[p] }

// inputSide reports whether the part is counted in the request's input tokens.
func (p Part) inputSide() bool { return p < Output }

// Usage is a request's tokens per part.
type Usage [numParts]int64

// InputTokens are all input-side tokens: what a long-context band is measured by.
func (u *Usage) InputTokens() int64 {
	var n int64
	for p := Input; p < Output; p++ {
		n += u[p]
	}
	return n
}

// OutputTokens are all output-side tokens.
func (u *Usage) OutputTokens() int64 { return u[Output] + u[AudioOutput] }

// Component is one priced part of a charge.
type Component struct {
	Part         Part
	Units        int64
	PricePerMTok int64
	Amount       int64
}

// Sel selects the levels of a rate card a request is priced at: the service tier
// (catalog.IsBaseTier names: the base card) and the inference_geo value ("" none).
type Sel struct {
	Tier string
	Geo  string
}

// Card is a rate card resolved for one request: a price per million tokens per part.
type Card [numParts]int64

// Resolve is the card p prices a request of inputTokens at, for sel. Precedence: base →
// long-context band (when inputTokens exceed its threshold) → service tier → region;
// a field a level does not set falls back to the level below, and a part no level sets
// falls back to the input price (cache, audio and image input) or the output price
// (audio output) so resolved. A tier or region p does not price is the base card
// (admission refuses such requests before they are held).
func Resolve(p *catalog.Prices, inputTokens int64, sel Sel) Card {
	levels := make([]*catalog.Rates, 0, 4)
	if r, ok := p.Geo(sel.Geo); ok && sel.Geo != "" {
		levels = append(levels, &r)
	}
	if r, ok := p.Tier(sel.Tier); ok && !catalog.IsBaseTier(sel.Tier) {
		levels = append(levels, &r)
	}
	if lc := p.LongContext; lc != nil && inputTokens > lc.AboveInputTokens {
		levels = append(levels, &lc.Rates)
	}
	levels = append(levels, &p.Rates)
	first := func(field func(*catalog.Rates) *int64) *int64 {
		for _, l := range levels {
			if v := field(l); v != nil {
				return v
			}
		}
		return nil
	}
	in := deref(first(func(r *catalog.Rates) *int64 { return r.InputPerMTok }))
	out := deref(first(func(r *catalog.Rates) *int64 { return r.OutputPerMTok }))
	or := func(v *int64, fallback int64) int64 {
		if v == nil {
			return fallback
		}
		return *v
	}
	return Card{
		Input:        in,
		CacheRead:    or(first(func(r *catalog.Rates) *int64 { return r.CacheReadPerMTok }), in),
		CacheWrite:   or(first(func(r *catalog.Rates) *int64 { return r.CacheWritePerMTok }), in),
		CacheWrite1h: or(first(func(r *catalog.Rates) *int64 { return r.CacheWrite1hPerMTok }), in),
		AudioInput:   or(first(func(r *catalog.Rates) *int64 { return r.AudioInputPerMTok }), in),
		ImageInput:   or(first(func(r *catalog.Rates) *int64 { return r.ImageInputPerMTok }), in),
		Output:       out,
		AudioOutput:  or(first(func(r *catalog.Rates) *int64 { return r.AudioOutputPerMTok }), out),
	}
}

// Charge is the rate-card rule: usage u priced by p at sel, one component per part with
// units > 0, each ceil(units × price / 1,000,000) micro-credits. The charge is the sum
// of the amounts (Sum).
func Charge(p *catalog.Prices, u Usage, sel Sel) []Component {
	card := Resolve(p, u.InputTokens(), sel)
	var out []Component
	for part, n := range u {
		if n <= 0 {
			continue
		}
		price := card[part]
		out = append(out, Component{Part: Part(part), Units: n, PricePerMTok: price, Amount: PerMillion(n, price)})
	}
	return out
}

// Sum is the charge of components.
func Sum(cs []Component) int64 {
	var n int64
	for _, c := range cs {
		n += c.Amount
	}
	return n
}

// Bound is what the hold of a chat request is priced from: its input and output token
// estimates, the parts it can incur beyond plain input and output, and the selections
// (tiers, region) its answer can be priced at.
type Bound struct {
	InputTokens, OutputTokens int64
	// Parts are the input- and output-side parts the request can incur besides Input,
	// CacheRead, CacheWrite and Output, which every request can: CacheWrite1h (cache
	// markers), AudioInput, ImageInput, AudioOutput.
	Parts []Part
	// Sels are the admissible selections: every tier the answer may report.
	Sels []Sel
}

// Max is the most a request bounded by b can be charged: for every admissible selection
// and both sides of a long-context band the estimate can cross, every input token at the
// dearest input-side part and every output token at the dearest output-side part, plus
// a micro-credit for each part beyond the first on either side: the charge rounds each
// component up on its own, the bound each side once.
func Max(p *catalog.Prices, b Bound) int64 {
	can := [numParts]bool{Input: true, CacheRead: true, CacheWrite: true, Output: true}
	for _, part := range b.Parts {
		can[part] = true
	}
	sizes := []int64{b.InputTokens}
	if lc := p.LongContext; lc != nil && b.InputTokens > lc.AboveInputTokens {
		sizes = append(sizes, lc.AboveInputTokens) // the answer may count fewer, below the band
	}
	var worst int64
	slack := int64(-2)
	for _, ok := range can {
		if ok {
			slack++
		}
	}
	for _, sel := range b.Sels {
		for _, size := range sizes {
			card := Resolve(p, size, sel)
			var in, out int64
			for part, ok := range can {
				switch {
				case !ok:
				case Part(part).inputSide():
					in = max(in, card[part])
				default:
					out = max(out, card[part])
				}
			}
			worst = max(worst, PerMillion(b.InputTokens, in)+PerMillion(b.OutputTokens, out))
		}
	}
	return worst + slack
}
