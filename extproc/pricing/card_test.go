package pricing

import (
	"testing"

	"github.com/llmgw/gateway/extproc/catalog"
)

// demoCached is the demo catalog's demo-cached card (LOCAL-STACK.md, "Rate cards").
func demoCached() *catalog.Prices {
	return &catalog.Prices{
		Rates: catalog.Rates{InputPerMTok: price(1_000_000), OutputPerMTok: price(2_000_000),
			CacheReadPerMTok: price(100_000), CacheWritePerMTok: price(1_250_000),
			AudioInputPerMTok: price(10_000_000), AudioOutputPerMTok: price(20_000_000)},
		ServiceTiers: map[string]catalog.Rates{
			"priority": {InputPerMTok: price(2_000_000), OutputPerMTok: price(4_000_000), CacheReadPerMTok: price(200_000)},
			"flex":     {InputPerMTok: price(500_000), OutputPerMTok: price(1_000_000), CacheReadPerMTok: price(50_000)},
		},
		LongContext: &catalog.LongContext{AboveInputTokens: 1000,
			Rates: catalog.Rates{InputPerMTok: price(2_000_000), OutputPerMTok: price(3_000_000), CacheReadPerMTok: price(200_000)}},
	}
}

// opus is an Opus-class card: $5 input, $0.50 cache read, $6.25 five-minute write, $10
// one-hour write, $25 output; a region 1.1× dearer.
func opus() *catalog.Prices {
	return &catalog.Prices{
		Rates: catalog.Rates{InputPerMTok: price(5_000_000), OutputPerMTok: price(25_000_000),
			CacheReadPerMTok: price(500_000), CacheWritePerMTok: price(6_250_000), CacheWrite1hPerMTok: price(10_000_000)},
		InferenceGeo: map[string]catalog.Rates{"us": {InputPerMTok: price(5_500_000), OutputPerMTok: price(27_500_000)}},
	}
}

func usage(parts map[Part]int64) Usage {
	var u Usage
	for p, n := range parts {
		u[p] = n
	}
	return u
}

func TestChargeIsTheSumOfComponents(t *testing.T) {
	plain := &catalog.Prices{Rates: catalog.Rates{InputPerMTok: price(1_000_000), OutputPerMTok: price(2_000_000)}}
	for _, tc := range []struct {
		name  string
		card  *catalog.Prices
		u     Usage
		sel   Sel
		want  map[Part][2]int64 // part → price, amount
		total int64
	}{
		{
			// The agent turn: $0.10625 at the provider (it was $0.46 with every
			// input token at the input price).
			name: "opus agent turn", card: opus(),
			u: usage(map[Part]int64{Input: 2000, CacheRead: 80_000, CacheWrite: 5000, Output: 1000}),
			want: map[Part][2]int64{Input: {5_000_000, 10_000}, CacheRead: {500_000, 40_000},
				CacheWrite: {6_250_000, 31_250}, Output: {25_000_000, 25_000}},
			total: 106_250,
		},
		{
			name: "one-hour write", card: opus(),
			u:     usage(map[Part]int64{Input: 10, CacheWrite1h: 1000, Output: 3}),
			want:  map[Part][2]int64{Input: {5_000_000, 50}, CacheWrite1h: {10_000_000, 10_000}, Output: {25_000_000, 75}},
			total: 10_125,
		},
		{
			// The region overrides input and output; the cache prices it does not set
			// fall back to the base card's.
			name: "region", card: opus(), sel: Sel{Geo: "us"},
			u:     usage(map[Part]int64{Input: 1000, CacheRead: 1000, Output: 1000}),
			want:  map[Part][2]int64{Input: {5_500_000, 5500}, CacheRead: {500_000, 500}, Output: {27_500_000, 27_500}},
			total: 33_500,
		},
		{
			// A plain card prices every input part at the input price.
			name: "fallbacks", card: plain,
			u: usage(map[Part]int64{Input: 1, CacheRead: 1, CacheWrite: 1, CacheWrite1h: 1, AudioInput: 1, ImageInput: 1, Output: 1, AudioOutput: 1}),
			want: map[Part][2]int64{Input: {1_000_000, 1}, CacheRead: {1_000_000, 1}, CacheWrite: {1_000_000, 1},
				CacheWrite1h: {1_000_000, 1}, AudioInput: {1_000_000, 1}, ImageInput: {1_000_000, 1},
				Output: {2_000_000, 2}, AudioOutput: {2_000_000, 2}},
			total: 10,
		},
		{
			name: "each component rounded up", card: demoCached(),
			u:     usage(map[Part]int64{Input: 3, CacheRead: 3, Output: 1}),
			want:  map[Part][2]int64{Input: {1_000_000, 3}, CacheRead: {100_000, 1}, Output: {2_000_000, 2}},
			total: 6,
		},
		{
			name: "audio", card: demoCached(),
			u:     usage(map[Part]int64{Input: 100, AudioInput: 100, Output: 10, AudioOutput: 50}),
			want:  map[Part][2]int64{Input: {1_000_000, 100}, AudioInput: {10_000_000, 1000}, Output: {2_000_000, 20}, AudioOutput: {20_000_000, 1000}},
			total: 2120,
		},
		{
			// The tier sets input, output and cache reads; writes fall back to the base.
			name: "priority tier", card: demoCached(), sel: Sel{Tier: "priority"},
			u:     usage(map[Part]int64{Input: 100, CacheRead: 200, CacheWrite: 300, Output: 10}),
			want:  map[Part][2]int64{Input: {2_000_000, 200}, CacheRead: {200_000, 40}, CacheWrite: {1_250_000, 375}, Output: {4_000_000, 40}},
			total: 655,
		},
		{
			name: "default and standard are the base card", card: demoCached(), sel: Sel{Tier: "standard"},
			u:     usage(map[Part]int64{Input: 100, Output: 10}),
			want:  map[Part][2]int64{Input: {1_000_000, 100}, Output: {2_000_000, 20}},
			total: 120,
		},
		{
			// 1,001 input tokens (cache reads count) cross the band: the whole request
			// at the band's prices, the writes it does not set at the base's.
			name: "long context", card: demoCached(),
			u:     usage(map[Part]int64{Input: 500, CacheRead: 400, CacheWrite: 101, Output: 10}),
			want:  map[Part][2]int64{Input: {2_000_000, 1000}, CacheRead: {200_000, 80}, CacheWrite: {1_250_000, 127}, Output: {3_000_000, 30}},
			total: 1237,
		},
		{
			name: "at the band's threshold: base", card: demoCached(),
			u:     usage(map[Part]int64{Input: 1000, Output: 10}),
			want:  map[Part][2]int64{Input: {1_000_000, 1000}, Output: {2_000_000, 20}},
			total: 1020,
		},
		{
			// Precedence: the tier overrides the band (flex sets input, output, reads).
			name: "long context at a tier", card: demoCached(), sel: Sel{Tier: "flex"},
			u:     usage(map[Part]int64{Input: 2000, Output: 10}),
			want:  map[Part][2]int64{Input: {500_000, 1000}, Output: {1_000_000, 10}},
			total: 1010,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := Charge(tc.card, tc.u, tc.sel)
			if len(cs) != len(tc.want) {
				t.Fatalf("components %+v, want %v", cs, tc.want)
			}
			for _, c := range cs {
				w, ok := tc.want[c.Part]
				if !ok || c.PricePerMTok != w[0] || c.Amount != w[1] || c.Units != tc.u[c.Part] {
					t.Errorf("%v: %+v, want price %d amount %d", c.Part, c, w[0], w[1])
				}
			}
			if got := Sum(cs); got != tc.total {
				t.Errorf("sum %d, want %d", got, tc.total)
			}
		})
	}
}

// TestPrecedence: base → long-context band → tier → region, each level falling back to
// the one below for a field it does not set.
func TestPrecedence(t *testing.T) {
	p := &catalog.Prices{
		Rates:        catalog.Rates{InputPerMTok: price(1), OutputPerMTok: price(10), CacheReadPerMTok: price(100), CacheWritePerMTok: price(1000)},
		LongContext:  &catalog.LongContext{AboveInputTokens: 5, Rates: catalog.Rates{InputPerMTok: price(2), OutputPerMTok: price(20), CacheReadPerMTok: price(200)}},
		ServiceTiers: map[string]catalog.Rates{"priority": {InputPerMTok: price(3), OutputPerMTok: price(30)}},
		InferenceGeo: map[string]catalog.Rates{"us": {InputPerMTok: price(4)}},
	}
	for _, tc := range []struct {
		name  string
		input int64
		sel   Sel
		want  Card
	}{
		{"base", 5, Sel{}, Card{Input: 1, CacheRead: 100, CacheWrite: 1000, CacheWrite1h: 1, AudioInput: 1, ImageInput: 1, Output: 10, AudioOutput: 10}},
		{"band", 6, Sel{}, Card{Input: 2, CacheRead: 200, CacheWrite: 1000, CacheWrite1h: 2, AudioInput: 2, ImageInput: 2, Output: 20, AudioOutput: 20}},
		{"tier over band", 6, Sel{Tier: "priority"}, Card{Input: 3, CacheRead: 200, CacheWrite: 1000, CacheWrite1h: 3, AudioInput: 3, ImageInput: 3, Output: 30, AudioOutput: 30}},
		{"region over tier", 6, Sel{Tier: "priority", Geo: "us"}, Card{Input: 4, CacheRead: 200, CacheWrite: 1000, CacheWrite1h: 4, AudioInput: 4, ImageInput: 4, Output: 30, AudioOutput: 30}},
		{"region over base", 1, Sel{Geo: "us"}, Card{Input: 4, CacheRead: 100, CacheWrite: 1000, CacheWrite1h: 4, AudioInput: 4, ImageInput: 4, Output: 10, AudioOutput: 10}},
	} {
		if got := Resolve(p, tc.input, tc.sel); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMaxBoundsEveryCharge: whatever parts the answer splits the estimated tokens into,
// at any admissible selection, the charge is at most the bound.
func TestMaxBoundsEveryCharge(t *testing.T) {
	tiers := []Sel{{Tier: "default"}, {Tier: "priority"}, {Tier: "flex"}}
	for _, tc := range []struct {
		name  string
		card  *catalog.Prices
		b     Bound
		want  int64
		parts []Part // input-side parts the answer may report
	}{
		{"plain request on demo-cached", demoCached(), Bound{InputTokens: 500, OutputTokens: 100, Sels: tiers[:1]},
			// the dearest input part is the 5-minute write (1.25), output 2; +2 rounding
			625 + 200 + 2, []Part{Input, CacheRead, CacheWrite}},
		{"auto on demo-cached", demoCached(), Bound{InputTokens: 500, OutputTokens: 100, Sels: tiers},
			// priority: input 2 (over its write 1.25), output 4
			1000 + 400 + 2, []Part{Input, CacheRead, CacheWrite}},
		{"estimate across the band", demoCached(), Bound{InputTokens: 1500, OutputTokens: 100, Sels: tiers[:1]},
			// the band's input 2 and output 3
			3000 + 300 + 2, []Part{Input, CacheRead, CacheWrite}},
		{"cache markers on opus", opus(), Bound{InputTokens: 1000, OutputTokens: 10, Parts: []Part{CacheWrite1h}, Sels: []Sel{{}}},
			10_000 + 250 + 3, []Part{Input, CacheRead, CacheWrite, CacheWrite1h}},
		{"audio", demoCached(), Bound{InputTokens: 100, OutputTokens: 100, Parts: []Part{AudioInput, AudioOutput}, Sels: tiers[:1]},
			1000 + 2000 + 4, []Part{Input, AudioInput}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Max(tc.card, tc.b)
			if got != tc.want {
				t.Errorf("Max = %d, want %d", got, tc.want)
			}
			// Every split of the tokens among the parts (in thirds, and all in one part),
			// every output split, every selection: never above the bound.
			for _, sel := range tc.b.Sels {
				for _, in := range splits(tc.b.InputTokens, tc.parts) {
					for _, out := range splits(tc.b.OutputTokens, outParts(tc.b.Parts)) {
						var u Usage
						for p := range u {
							u[p] = in[p] + out[p]
						}
						if c := Sum(Charge(tc.card, u, sel)); c > got {
							t.Fatalf("charge %d above the bound %d for %v at %v", c, got, u, sel)
						}
					}
				}
			}
		})
	}
}

func outParts(extra []Part) []Part {
	out := []Part{Output}
	for _, p := range extra {
		if p == AudioOutput {
			out = append(out, p)
		}
	}
	return out
}

// splits are ways of dividing n tokens among parts: all in each one, and (with odd
// remainders, for rounding) nearly even.
func splits(n int64, parts []Part) []Usage {
	var out []Usage
	for _, p := range parts {
		var u Usage
		u[p] = n
		out = append(out, u)
	}
	var even Usage
	left := n
	for i, p := range parts {
		share := n / int64(len(parts))
		if i == len(parts)-1 {
			share = left
		}
		even[p] = share
		left -= share
	}
	return append(out, even)
}
