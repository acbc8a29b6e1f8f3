package ledger

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MicrosPerCredit is how many micros make one credit (1 credit = 1 USD).
const MicrosPerCredit = 1_000_000

// ParseCredits reads a decimal credit amount ("10", "0.25", "1.000001") into micros,
// exactly. More than six decimals, signs, exponents and overflow are errors.
func ParseCredits(s string) (Micros, error) {
	s = strings.TrimSpace(s)
	whole, frac, hasDot := strings.Cut(s, ".")
	if (whole == "" && frac == "") || (hasDot && frac == "") {
		return 0, fmt.Errorf("invalid amount %q", s)
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("amount %q has more than 6 decimals", s)
	}
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("invalid amount %q", s)
		}
	}
	var w int64
	if whole != "" {
		v, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || v > math.MaxInt64/MicrosPerCredit-1 {
			return 0, fmt.Errorf("amount %q is too large", s)
		}
		w = v
	}
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	return w*MicrosPerCredit + f, nil
}

// FormatCredits writes micros as an exact decimal credit amount without trailing zeros
// ("10", "0.25", "-1.5").
func FormatCredits(m Micros) string {
	u := uint64(m)
	sign := ""
	if m < 0 {
		u, sign = uint64(-m), "-"
	}
	s := strconv.FormatUint(u/MicrosPerCredit, 10)
	if f := u % MicrosPerCredit; f != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", f), "0")
	}
	return sign + s
}

// FormatCredits6 writes micros as credits with exactly six decimals ("10.000000",
// "-0.000026"), as the console shows every amount.
func FormatCredits6(m Micros) string {
	u := uint64(m)
	sign := ""
	if m < 0 {
		u, sign = uint64(-m), "-"
	}
	return fmt.Sprintf("%s%d.%06d", sign, u/MicrosPerCredit, u%MicrosPerCredit)
}
