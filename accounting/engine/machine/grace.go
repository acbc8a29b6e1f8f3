package machine

import (
	"slices"
	"strings"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// graceLapsed renews every hold whose lease ran out before At until At + Grace, the
// earliest expiry first.
func (s *State) graceLapsed(c *GraceLapsed) (Answer, []Event) {
	if c.Grace <= 0 {
		return invalid("a grace must be positive"), nil
	}
	now := norm(c.At)
	until := now.Add(c.Grace.Truncate(time.Microsecond))
	var evs []Event
	for {
		top, ok := s.expiry.top()
		if !ok || !top.at.Before(now) {
			break
		}
		evs = append(evs, s.record(Renewed{ReservationID: top.res.id, ExpiresAt: until, At: now})...)
	}
	return Answer{Expired: len(evs)}, evs
}

// tierList is every tier, by name.
func (s *State) tierList() []ledger.Tier {
	out := make([]ledger.Tier, 0, len(s.tiers))
	for _, t := range s.tiers {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b ledger.Tier) int { return strings.Compare(a.Name, b.Name) })
	return out
}
