package machine

import (
	"fmt"
	"math"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// The hot path: ledger_reserve, ledger_commit, ledger_release, the store's Renew and
// ledger_expire_due, with the store's argument checks before them.

// Refusals of Reserve, each with the store's detail.
var (
	errInvalidKey = ledger.Refuse(ledger.ReasonInvalidAPIKey, "unknown, disabled, revoked or expired key")
	errSuspended  = ledger.Refuse(ledger.ReasonAccountSuspended, "the account is suspended")
	errNoCredits  = ledger.Refuse(ledger.ReasonInsufficientCredits, "available credits do not cover the amount")
	errOtherKey   = ledger.Refuse(ledger.ReasonAlreadyExists, "the request id belongs to another key's reservation")
)

// shared returns a copy of a refusal shared by every answer, so a caller that changes
// the error it got cannot change the next one.
func shared(r *ledger.Refusal) Answer {
	c := *r
	return refused(&c)
}

func (s *State) reserve(c *Reserve) (Answer, []Event) {
	r := &c.Request
	switch {
	case r.RequestID == "":
		return invalid("a reservation needs a request id"), nil
	case r.Amount < 0:
		return invalid("a reservation amount must not be negative"), nil
	case r.Pool != ledger.PoolGeneral && r.Pool != ledger.PoolHighCost:
		return invalid(fmt.Sprintf("unknown pool %d", r.Pool)), nil
	case r.TTL < 0:
		return invalid("a reservation ttl must not be negative"), nil
	case r.Tokens < 0:
		return invalid("a reservation's token bound must not be negative"), nil
	}
	k := s.keys[r.KeyID]
	if k == nil {
		return shared(errInvalidKey), nil
	}
	if prior := s.byRequest[r.RequestID]; prior != nil {
		if prior.key != k {
			return shared(errOtherKey), nil
		}
		return Answer{Reservation: prior.view()}, nil
	}
	now := norm(c.At)
	a := k.acct
	switch {
	case !k.usable(now):
		return shared(errInvalidKey), nil
	case a.suspended:
		return shared(errSuspended), nil
	case !k.allows(r.Model):
		return modelRefused(k, r.Model), nil
	case a.balance-a.reserved < r.Amount:
		ref := *errNoCredits
		available := a.balance - a.reserved
		ref.Available = &available
		return refused(&ref), nil
	}
	if r.Amount > 0 {
		if ans, ok := s.spendLimits(k, r.Amount, now); !ok {
			return ans, nil
		}
		if ans, ok := projectLimits(k.project, r.Amount, now); !ok {
			return ans, nil
		}
	}
	t := a.tier
	if a.inFlight >= t.InFlightGeneral {
		return poolFull("general"), nil
	}
	if r.Pool == ledger.PoolHighCost && a.inFlightHigh >= t.InFlightHighCost {
		return poolFull("high_cost"), nil
	}
	minute, count := now.Truncate(time.Minute), 0
	if !a.rpmMinute.Before(minute) {
		minute, count = a.rpmMinute, a.rpmCount
	}
	rpm := t.RPMBeforeTopUp
	if a.toppedUp {
		rpm = t.RPMAfterTopUp
	}
	if count >= rpm {
		return refused(&ledger.Refusal{
			Reason: ledger.ReasonRateLimitExceeded, Limit: "rpm", RetryAfter: retryAfter(now, minute.Add(time.Minute)),
			Detail: "the tier's requests per minute are used up",
		}), nil
	}
	if ans, ok := rateLimits(k, r.Tokens, now); !ok {
		return ans, nil
	}
	if r.Amount > 0 && windowsOverflow(k, r.Amount, now) {
		return outOfRange("reserve"), nil
	}
	ttl := r.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	e := Reserved{
		ID: c.ID, RequestID: r.RequestID, AccountID: a.id, KeyID: k.id, Model: r.Model, Amount: r.Amount,
		Pool: r.Pool, At: now, ExpiresAt: now.Add(ttl.Truncate(time.Microsecond)), Tokens: r.Tokens,
	}
	s.applyReserved(&e)
	evs := []Event{e}
	if r.Amount > 0 {
		evs = append(evs, s.lowBalanceAlert(a, now)...) // available counts holds: a hold can take it below
	}
	return Answer{Reservation: s.reservations[e.ID].view()}, evs
}

// spendLimits checks k's monthly then daily limit for amount more at now.
func (s *State) spendLimits(k *key, amount ledger.Micros, now time.Time) (Answer, bool) {
	if k.monthly != nil || k.daily != nil {
		month, day := monthStart(now), dayStart(now)
		for _, l := range [2]struct {
			limit  *ledger.Micros
			period string
			start  time.Time
			name   string
		}{{k.monthly, periodMonth, month, "monthly"}, {k.daily, periodDay, day, "daily"}} {
			if l.limit == nil {
				continue
			}
			used := k.used(l.period, l.start)
			if sumOverflows(used, amount) {
				return outOfRange("reserve"), false
			}
			if used+amount > *l.limit {
				return refused(&ledger.Refusal{
					Reason: ledger.ReasonKeyLimitReached, Limit: l.name,
					RetryAfter: retryAfter(now, windowEnd(l.period, l.start)),
					Detail:     "the key's " + l.name + " spend limit would be crossed",
				}), false
			}
		}
	}
	return Answer{}, true
}

// windowsOverflow reports whether k's windows at now cannot add amount: their columns
// are bigints, and the statement that would add it fails.
func windowsOverflow(k *key, amount ledger.Micros, now time.Time) bool {
	for _, w := range [2]*window{k.windowAt(periodDay, dayStart(now)), k.windowAt(periodMonth, monthStart(now))} {
		if w != nil && (sumOverflows(w.held, amount) || sumOverflows(w.committed+w.held, amount)) {
			return true
		}
	}
	return false
}

func poolFull(limit string) Answer {
	return refused(&ledger.Refusal{
		Reason: ledger.ReasonConcurrencyLimitExceeded, Limit: limit, RetryAfter: ledger.ConcurrencyRetryAfter,
		Detail: "the account's " + limit + " in-flight pool is full",
	})
}

// retryAfter is whole seconds from now to end, at least 1.
func retryAfter(now, end time.Time) int {
	return int(max(1, math.Ceil(end.Sub(now).Seconds())))
}

func stateName(st ledger.ReservationState) string {
	switch st {
	case ledger.StateHeld:
		return "held"
	case ledger.StateCommitted:
		return "committed"
	case ledger.StateReleased:
		return "released"
	case ledger.StateExpired:
		return "expired"
	}
	return fmt.Sprintf("state(%d)", int(st))
}

func (s *State) commit(c *Commit) (Answer, []Event) {
	q := &c.Request
	if q.Actual < 0 {
		return invalid("an actual cost must not be negative"), nil
	}
	r := s.reservations[q.ReservationID]
	switch {
	case r == nil:
		return refused(ledger.ErrNotFound), nil
	case r.state == ledger.StateCommitted:
		return Answer{Commit: ledger.CommitResult{Charged: r.charged, Capped: *r.actual > r.amount, Replayed: true}}, nil
	case r.state != stateHeld:
		return refused(ledger.Refuse(ledger.ReasonReservationSettled,
			"the reservation was "+stateName(r.state)+"; nothing was charged")), nil
	}
	e := Committed{
		ReservationID: r.id, Actual: q.Actual, Charged: min(q.Actual, r.amount), Usage: q.Usage,
		UpstreamModel: q.UpstreamModel, Channel: q.Channel, At: norm(c.At),
	}
	s.applyCommitted(&e)
	evs := []Event{e}
	if e.Charged > 0 {
		evs = append(evs, s.budgetAlerts(r, r.key, e.At)...)
	}
	return Answer{Commit: ledger.CommitResult{Charged: e.Charged, Capped: q.Actual > r.amount}}, evs
}

func (s *State) release(c *Release) (Answer, []Event) {
	r := s.reservations[c.ReservationID]
	if r == nil {
		return refused(ledger.ErrNotFound), nil
	}
	if r.state != stateHeld {
		return Answer{Release: ledger.ReleaseResult{State: r.state, Charged: r.charged}}, nil
	}
	e := Released{ReservationID: r.id, State: ledger.StateReleased, Reason: c.Reason, At: norm(c.At)}
	s.applyReleased(&e)
	return Answer{Release: ledger.ReleaseResult{State: ledger.StateReleased}}, []Event{e}
}

// renew moves a held reservation's expiry to At + TTL, never earlier than it was.
func (s *State) renew(c *Renew) (Answer, []Event) {
	if c.TTL < 0 {
		return invalid("a ttl must not be negative"), nil
	}
	r := s.reservations[c.ReservationID]
	if r == nil {
		return refused(ledger.ErrNotFound), nil
	}
	if r.state != stateHeld {
		return refused(ledger.Refuse(ledger.ReasonReservationSettled, "the reservation is no longer held")), nil
	}
	ttl := c.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	now := norm(c.At)
	expires := now.Add(ttl.Truncate(time.Microsecond))
	if !expires.After(r.expiresAt) {
		return Answer{Expires: r.expiresAt}, nil
	}
	return Answer{Expires: expires}, s.record(Renewed{ReservationID: r.id, ExpiresAt: expires, At: now})
}

// expireDue expires up to Limit held reservations whose expiry is at or before At,
// the earliest expiry first (then by id).
func (s *State) expireDue(c *ExpireDue) (Answer, []Event) {
	now := norm(c.At)
	var evs []Event
	for len(evs) < c.Limit {
		top, ok := s.expiry.top()
		if !ok || top.at.After(now) {
			break
		}
		e := Released{ReservationID: top.res.id, State: ledger.StateExpired, Reason: "expired", At: now}
		s.applyReleased(&e)
		evs = append(evs, e)
	}
	return Answer{Expired: len(evs)}, evs
}
