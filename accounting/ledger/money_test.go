package ledger

import "testing"

func TestFormatCredits6(t *testing.T) {
	for _, tc := range []struct {
		m    Micros
		want string
	}{
		{0, "0.000000"},
		{1, "0.000001"},
		{26, "0.000026"},
		{-26, "-0.000026"},
		{12_500_000, "12.500000"},
		{-1_000_000, "-1.000000"},
		{9_223_372_036_854_775_807, "9223372036854.775807"},
	} {
		if got := FormatCredits6(tc.m); got != tc.want {
			t.Errorf("FormatCredits6(%d) = %q, want %q", tc.m, got, tc.want)
		}
	}
}
