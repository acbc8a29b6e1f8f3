package ledger

import (
	"fmt"
	"math/bits"
	"time"
)

// Component names, in the order a statement lists them: a rate card's priced parts
// of a request.
const (
	ComponentInput        = "input"
	ComponentCacheRead    = "cache_read"
	ComponentCacheWrite   = "cache_write"
	ComponentCacheWrite1h = "cache_write_1h"
	ComponentAudioInput   = "audio_input"
	ComponentImageInput   = "image_input"
	ComponentOutput       = "output"
	ComponentAudioOutput  = "audio_output"
)

// ComponentNames lists every component a charge may carry, in statement order.
var ComponentNames = []string{ComponentInput, ComponentCacheRead, ComponentCacheWrite, ComponentCacheWrite1h,
	ComponentAudioInput, ComponentImageInput, ComponentOutput, ComponentAudioOutput}

// ComponentAmount is what units cost at pricePerMTok micro-credits per million units,
// rounded up to a micro-credit; ok is false when it does not fit in Micros.
func ComponentAmount(units int64, pricePerMTok Micros) (Micros, bool) {
	if units < 0 || pricePerMTok < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(units), uint64(pricePerMTok))
	if hi >= 1_000_000 { // the quotient would not fit in 64 bits
		return 0, false
	}
	q, r := bits.Div64(hi, lo, 1_000_000)
	if r != 0 {
		q++
	}
	if q > 1<<63-1 {
		return 0, false
	}
	return Micros(q), true
}

// ValidateComponents reports what is wrong with a charge's breakdown: an unknown or
// repeated name, units that are not positive, a negative price, an amount other than
// ComponentAmount's, or amounts that do not sum to actual. No components is valid (a
// charge priced by units, or by a gateway without rate cards).
func ValidateComponents(actual Micros, cs []Component) error {
	if len(cs) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var sum Micros
	for _, c := range cs {
		known := false
		for _, n := range ComponentNames {
			known = known || n == c.Name
		}
		switch {
		case !known:
			return fmt.Errorf("unknown charge component %q", c.Name)
		case seen[c.Name]:
			return fmt.Errorf("charge component %q appears twice", c.Name)
		case c.Units <= 0:
			return fmt.Errorf("charge component %q has %d units; only components with units are recorded", c.Name, c.Units)
		case c.PricePerMTok < 0:
			return fmt.Errorf("charge component %q has a negative price", c.Name)
		}
		seen[c.Name] = true
		want, ok := ComponentAmount(c.Units, c.PricePerMTok)
		if !ok || want != c.Amount {
			return fmt.Errorf("charge component %q: %d units at %d per million cost %d, not %d",
				c.Name, c.Units, c.PricePerMTok, want, c.Amount)
		}
		if sum > 1<<63-1-c.Amount {
			return fmt.Errorf("charge components overflow")
		}
		sum += c.Amount
	}
	if sum != actual {
		return fmt.Errorf("charge components sum to %d, the actual cost is %d", sum, actual)
	}
	return nil
}

// PricedAmount is the sum of a breakdown's amounts: the charge at the card's prices,
// before the hold capped it.
func PricedAmount(cs []Component) Micros {
	var sum Micros
	for _, c := range cs {
		sum += c.Amount
	}
	return sum
}

// ReconcileQuery asks for every account's charges in the UTC days From..To, both
// included (dates at midnight UTC).
type ReconcileQuery struct {
	From, To time.Time
}

// MaxReconcileDays bounds a reconciliation's range: it reads the charges themselves.
const MaxReconcileDays = 92

// ReconcileRow is the charges of one channel and upstream model on one UTC day, across
// all accounts: what an operator compares with the provider's usage export.
type ReconcileRow struct {
	Day           string // "2006-01-02"
	Channel       string
	UpstreamModel string
	Requests      int64
	// Components sums each component's units and amounts (at the card's prices), in
	// ComponentNames order.
	Components []ComponentTotal
	// Charged is what the accounts paid: the components' sum less what holds capped.
	Charged Micros
}

// ComponentTotal is one component's units and amount summed over many charges.
type ComponentTotal struct {
	Name   string
	Units  int64
	Amount Micros
}

// ChargedComponents is a capped charge's breakdown as the account paid it: the priced
// components cs with the part of their sum above charged (the hold the charge was capped
// at) taken off, from the last component backwards, so that the amounts sum to charged.
// An uncapped breakdown is returned as it is. Units and prices stay as priced.
func ChargedComponents(cs []Component, charged Micros) []Component {
	over := PricedAmount(cs) - charged
	if over <= 0 {
		return cs
	}
	out := append([]Component(nil), cs...)
	for i := len(out) - 1; i >= 0 && over > 0; i-- {
		cut := min(out[i].Amount, over)
		out[i].Amount -= cut
		over -= cut
	}
	return out
}
