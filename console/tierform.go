package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// tierField is one number of the tier form: its form name, its label, the least value
// that does not refuse every request, and where it goes.
type tierField struct {
	name, label string
	least       int64
	set         func(t *accountingv1.Tier, v int32)
}

// tierFields: a tier whose requests per minute after a top-up or whose general pool is
// 0 refuses every request, so those start at 1. Before a top-up 0 is a policy (top up
// first), and a 0 high-cost pool closes the high-cost models only.
var tierFields = []tierField{
	{"rpm_before", "RPM before", 0, func(t *accountingv1.Tier, v int32) { t.RpmBeforeTopup = v }},
	{"rpm_after", "RPM after", 1, func(t *accountingv1.Tier, v int32) { t.RpmAfterTopup = v }},
	{"in_flight", "In flight", 1, func(t *accountingv1.Tier, v int32) { t.InFlightGeneral = v }},
	{"in_flight_high_cost", "In flight, high-cost", 0, func(t *accountingv1.Tier, v int32) { t.InFlightHighCost = v }},
}

// tierFromForm reads the tier form, or says what is wrong with every field that is
// (empty, not a whole number in range): nothing is guessed, so "1,200" or "" is never
// read as 0 and 4294967328 never wraps.
func tierFromForm(r *http.Request) (*accountingv1.Tier, []string) {
	t := &accountingv1.Tier{Name: strings.TrimSpace(r.PostFormValue("name"))}
	var problems []string
	if t.Name == "" {
		problems = append(problems, "Name: enter the tier's name.")
	}
	for _, f := range tierFields {
		raw := strings.TrimSpace(r.PostFormValue(f.name))
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || v < f.least || v > ledger.MaxTierLimit {
			problems = append(problems, fmt.Sprintf("%s: enter a whole number from %d to %d (digits only), not %q.", f.label, f.least, ledger.MaxTierLimit, raw))
			continue
		}
		f.set(t, int32(v))
	}
	return t, problems
}
