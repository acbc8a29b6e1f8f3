package ledger

import (
	"math"
	"slices"
	"testing"
)

func TestComponentAmountRoundsUp(t *testing.T) {
	for _, c := range []struct {
		units, price, want int64
		ok                 bool
	}{
		{80_000, 500_000, 40_000, true},
		{1, 1, 1, true},         // a millionth of a micro-credit is a micro-credit
		{3, 333_333, 1, true},   // 0.999999 rounds up
		{3, 333_334, 2, true},   // 1.000002 rounds up
		{0, 5_000_000, 0, true}, // nothing costs nothing
		{math.MaxInt64, 1_000_000, math.MaxInt64, true},
		{math.MaxInt64, 1_000_001, 0, false},
		{-1, 1, 0, false},
	} {
		got, ok := ComponentAmount(c.units, c.price)
		if got != c.want || ok != c.ok {
			t.Errorf("ComponentAmount(%d, %d) = %d, %v; want %d, %v", c.units, c.price, got, ok, c.want, c.ok)
		}
	}
}

func TestValidateComponents(t *testing.T) {
	in := Component{Name: "input", Units: 2_000, PricePerMTok: 5_000_000, Amount: 10_000}
	out := Component{Name: "output", Units: 1_000, PricePerMTok: 25_000_000, Amount: 25_000}
	if err := ValidateComponents(35_000, []Component{in, out}); err != nil {
		t.Errorf("a valid breakdown: %v", err)
	}
	if err := ValidateComponents(123, nil); err != nil {
		t.Errorf("no breakdown: %v", err)
	}
	for name, c := range map[string]struct {
		actual Micros
		cs     []Component
	}{
		"unknown name":      {10_000, []Component{{Name: "reasoning", Units: 2_000, PricePerMTok: 5_000_000, Amount: 10_000}}},
		"twice":             {20_000, []Component{in, in}},
		"no units":          {0, []Component{{Name: "input", PricePerMTok: 5}}},
		"negative price":    {0, []Component{{Name: "input", Units: 1, PricePerMTok: -5}}},
		"amount not priced": {10_001, []Component{{Name: "input", Units: 2_000, PricePerMTok: 5_000_000, Amount: 10_001}}},
		"sum not actual":    {35_001, []Component{in, out}},
	} {
		if err := ValidateComponents(c.actual, c.cs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestChargedComponents(t *testing.T) {
	priced := []Component{
		{Name: ComponentInput, Units: 2000, PricePerMTok: 5_000_000, Amount: 10_000},
		{Name: ComponentCacheRead, Units: 80_000, PricePerMTok: 500_000, Amount: 40_000},
		{Name: ComponentOutput, Units: 1000, PricePerMTok: 25_000_000, Amount: 25_000},
	}
	amounts := func(cs []Component) []Micros {
		var out []Micros
		for _, c := range cs {
			out = append(out, c.Amount)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		charged Micros
		want    []Micros
	}{
		{"not capped", 75_000, []Micros{10_000, 40_000, 25_000}},
		{"capped within the last", 60_000, []Micros{10_000, 40_000, 10_000}},
		{"capped across two", 30_000, []Micros{10_000, 20_000, 0}},
		{"capped to nothing", 0, []Micros{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ChargedComponents(priced, tc.charged)
			if !slices.Equal(amounts(got), tc.want) || PricedAmount(got) != tc.charged {
				t.Errorf("amounts %v (sum %d), want %v summing to %d", amounts(got), PricedAmount(got), tc.want, tc.charged)
			}
			if priced[2].Amount != 25_000 {
				t.Error("the priced breakdown was changed in place")
			}
		})
	}
}
