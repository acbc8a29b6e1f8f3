// Package pricing is the gateway's money rule for one request, as pure functions of a
// model's published prices (catalog.Prices, integer micro-credits): what counted usage
// costs (the charge) and what the most a request can use costs (the hold). The lifecycle
// asks it twice, before the hold and at settlement, so that both sides of the bound
// are priced by the same rule.
//
// It must not import the lifecycle, a ledger client or anything with I/O, and it does
// not count tokens: callers bring the counts.
package pricing

import "github.com/llmgw/gateway/extproc/catalog"

// Unit is what a per-unit endpoint bills, as the ledger records it.
type Unit string

const (
	Characters Unit = "characters" // speech input, priced per million
	Images     Unit = "images"     // generated images, priced each
	Seconds    Unit = "seconds"    // generated video, priced each
)

// PerMillion is units at a price per million units, rounded up to a micro-credit.
// Non-positive units or prices cost nothing; the product cannot overflow for any count
// below 2^40 and price below 2^23 micro-credits per unit.
func PerMillion(units, pricePerMillion int64) int64 {
	if units <= 0 || pricePerMillion <= 0 {
		return 0
	}
	q, r := units/1_000_000, units%1_000_000
	return q*pricePerMillion + (r*pricePerMillion+999_999)/1_000_000
}

// Tokens is the cost of input and output tokens at the model's token prices.
func Tokens(p catalog.Prices, input, output int64) int64 {
	return PerMillion(input, deref(p.InputPerMTok)) + PerMillion(output, deref(p.OutputPerMTok))
}

// Units is the cost of n units of a per-unit endpoint at the model's unit price; a unit
// the prices do not know costs nothing (catalog validation requires the model's price).
func Units(p catalog.Prices, unit Unit, n int64) int64 {
	switch unit {
	case Characters:
		return PerMillion(n, deref(p.PerMillionChars))
	case Images:
		return max(n, 0) * deref(p.PerImage)
	case Seconds:
		return max(n, 0) * deref(p.PerSecond)
	}
	return 0
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
