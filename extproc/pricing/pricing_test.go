package pricing

import (
	"slices"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/catalog"
)

func price(v int64) *int64 { return &v }

func TestPerMillionRoundsUp(t *testing.T) {
	for _, tc := range []struct{ units, price, want int64 }{
		{0, 1_000_000, 0},
		{-5, 1_000_000, 0},
		{5, 0, 0},
		{1, 1, 1},         // a millionth of a micro-credit is still one
		{1, 1_000_000, 1}, // one token at $1 per million
		{999_999, 1, 1},   // rounded up
		{1_000_000, 3, 3}, // exact
		{1_000_001, 3, 4}, // the remainder rounded up on its own
		{2_500_000, 2_000_000, 5_000_000},
		{1_000_000, 2_000_000, 2_000_000},
		{3, 100_000, 1},
		{3_500_000, 15_000_000, 52_500_000},
		{1000, 0, 0},
		{1 << 40, 1 << 22, (1<<40)/1_000_000*(1<<22) + ((1<<40)%1_000_000*(1<<22)+999_999)/1_000_000},
	} {
		if got := PerMillion(tc.units, tc.price); got != tc.want {
			t.Errorf("PerMillion(%d, %d) = %d, want %d", tc.units, tc.price, got, tc.want)
		}
	}
}

func TestTokensAndUnits(t *testing.T) {
	chat := catalog.Prices{Rates: catalog.Rates{InputPerMTok: price(1_000_000), OutputPerMTok: price(2_000_000)}}
	media := catalog.Prices{PerMillionChars: price(15_000_000), PerImage: price(40_000), PerSecond: price(100_000)}
	for _, tc := range []struct {
		name string
		got  int64
		want int64
	}{
		{"input and output each rounded up", Tokens(chat, 3, 1), 3 + 2},
		{"input only", Tokens(chat, 1_000_000, 0), 1_000_000},
		{"no prices", Tokens(catalog.Prices{}, 10, 10), 0},
		{"speech characters", Units(media, Characters, 11), 165},
		{"images", Units(media, Images, 2), 80_000},
		{"video seconds", Units(media, Seconds, 8), 800_000},
		{"negative units", Units(media, Images, -1), 0},
		{"unknown unit", Units(media, "pages", 3), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

// TestTheLedgerAgrees: the ledger refuses a charge whose components it would price
// otherwise, so every part's name is one the ledger knows and PerMillion equals the
// ledger's rounding for any usage the lifecycle can report (clamped below 2^40) at any
// price the catalog admits.
func TestTheLedgerAgrees(t *testing.T) {
	for p := Part(0); p < numParts; p++ {
		if !slices.Contains(ledger.ComponentNames, p.String()) {
			t.Errorf("part %d is named %q, which the ledger does not know", p, p)
		}
	}
	units := []int64{0, 1, 999_999, 1_000_000, 1_000_001, 123_456_789, 1 << 40}
	prices := []int64{0, 1, 3, 999_999, 1_000_000, 15_000_000, 123_456_789_012, catalog.MaxPricePerMTok}
	for _, u := range units {
		for _, pr := range prices {
			want, ok := ledger.ComponentAmount(u, pr)
			if got := PerMillion(u, pr); !ok || got != want {
				t.Errorf("PerMillion(%d, %d) = %d, the ledger's %d (fits %v)", u, pr, got, want, ok)
			}
		}
	}
}
