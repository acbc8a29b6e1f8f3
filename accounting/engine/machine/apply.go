package machine

import (
	"fmt"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// apply folds one event into s. An event that does not fit the state (an unknown
// account, key or reservation) means the journal and the state disagree: it panics
// rather than let a replay diverge silently.
func (s *State) apply(e Event) {
	switch e := e.(type) {
	case AccountCreated:
		s.applyAccountCreated(&e)
	case ToppedUp:
		s.applyToppedUp(&e)
	case AccountSuspended:
		s.mustAccount(e.AccountID).suspended = e.Suspended
	case AccountLabeled:
		s.mustAccount(e.AccountID).label = e.Label
	case TierPut:
		s.putTier(e.Tier)
	case KeyCreated:
		s.applyKeyCreated(&e)
	case KeyChanged:
		s.applyKeyChanged(&e)
	case Reserved:
		s.applyReserved(&e)
	case Committed:
		s.applyCommitted(&e)
	case Released:
		s.applyReleased(&e)
	case Renewed:
		r := s.mustHeld(e.ReservationID)
		r.expiresAt = e.ExpiresAt
		s.track(r)
	case VideoTaskRecorded:
		t := e.Task
		s.videoTasks[t.TaskID] = &t
	case Forgotten:
		s.applyForgotten(e.Before)
	case ProjectCreated:
		s.applyProjectCreated(&e)
	case ProjectChanged:
		s.applyProjectChanged(&e)
	case ProjectDeleted:
		s.applyProjectDeleted(&e)
	case KeyPlaced:
		s.applyKeyPlaced(&e)
	case LowBalanceSet:
		a := s.mustAccount(e.AccountID)
		a.lowBalance, a.lowFired = e.Threshold, false
	case Alerted:
		s.applyAlerted(&e)
	case Audited:
		// Recorded for the audit log; the state does not keep it.
	default:
		panic(fmt.Sprintf("machine: unknown event %T", e))
	}
}

func (s *State) mustAccount(id string) *account {
	a := s.accounts[id]
	if a == nil {
		panic("machine: event for unknown account " + id)
	}
	return a
}

func (s *State) mustKey(id string) *key {
	k := s.keys[id]
	if k == nil {
		panic("machine: event for unknown key " + id)
	}
	return k
}

func (s *State) mustHeld(id string) *reservation {
	r := s.reservations[id]
	if r == nil || r.state != stateHeld {
		panic("machine: settlement event for a reservation not held: " + id)
	}
	return r
}

func (s *State) applyAccountCreated(e *AccountCreated) {
	t := s.tiers[e.Tier]
	if t == nil {
		panic("machine: account of unknown tier " + e.Tier)
	}
	s.accounts[e.ID] = &account{id: e.ID, tier: t, label: e.Label, createdAt: e.At}
}

func (s *State) applyToppedUp(e *ToppedUp) {
	a := s.mustAccount(e.AccountID)
	a.balance += e.Amount
	a.toppedUp = true
	if a.lowFired && a.balance-a.reserved >= *a.lowBalance {
		a.lowFired = false // lifted above the threshold: armed again
	}
	if e.IdempotencyKey != "" {
		if a.topUpKeys == nil {
			a.topUpKeys = map[string]struct{}{}
		}
		a.topUpKeys[e.IdempotencyKey] = struct{}{}
	}
}

func (s *State) applyKeyCreated(e *KeyCreated) {
	k := &key{
		id: e.ID, acct: s.mustAccount(e.AccountID), hash: e.Hash, prefix: e.Prefix, name: e.Name,
		allowedModels: e.AllowedModels, daily: e.DailyLimit, monthly: e.MonthlyLimit,
		expiresAt: e.ExpiresAt, adminCreated: e.AdminCreated, createdAt: e.At,
	}
	s.keys[k.id] = k
	s.byHash[string(k.hash)] = k
}

func (s *State) applyKeyChanged(e *KeyChanged) {
	k := s.mustKey(e.KeyID)
	if !equalPtr(k.daily, e.DailyLimit) {
		rearm(k.windows, periodDay, e.DailyLimit)
	}
	if !equalPtr(k.monthly, e.MonthlyLimit) {
		rearm(k.windows, periodMonth, e.MonthlyLimit)
	}
	k.name, k.allowedModels, k.daily, k.monthly = e.Name, e.AllowedModels, e.DailyLimit, e.MonthlyLimit
	k.expiresAt, k.disabled, k.revokedAt = e.ExpiresAt, e.Disabled, e.RevokedAt
}

func (s *State) applyReserved(e *Reserved) {
	k := s.mustKey(e.KeyID)
	a := k.acct
	r := &reservation{
		id: e.ID, requestID: e.RequestID, acct: a, key: k, model: e.Model, amount: e.Amount,
		pool: e.Pool, state: stateHeld, createdAt: e.At, expiresAt: e.ExpiresAt,
	}
	s.reservations[r.id] = r
	s.byRequest[r.requestID] = r
	s.held++
	a.reserved += r.amount
	a.inFlight++
	if r.pool == ledger.PoolHighCost {
		a.inFlightHigh++
	}
	if minute := e.At.Truncate(time.Minute); a.rpmMinute.Before(minute) {
		a.rpmMinute, a.rpmCount = minute, 1
	} else {
		a.rpmCount++
	}
	if r.amount > 0 {
		r.day = k.openWindow(periodDay, dayStart(e.At))
		r.month = k.openWindow(periodMonth, monthStart(e.At))
		r.day.held += r.amount
		r.month.held += r.amount
	}
	s.holdOnPath(r, e.Tokens, e.At)
	s.track(r)
}

// settle ends r's hold, charging charged; of its token bound, used tokens stay taken.
func (s *State) settle(r *reservation, state ledger.ReservationState, charged ledger.Micros, used int64, at time.Time) {
	a := r.acct
	r.state, r.charged, r.settledAt = state, charged, at
	s.held--
	a.balance -= charged
	a.reserved -= r.amount
	a.inFlight--
	if r.pool == ledger.PoolHighCost {
		a.inFlightHigh--
	}
	if r.day != nil {
		r.day.held -= r.amount
		r.day.committed += charged
		r.month.held -= r.amount
		r.month.committed += charged
		r.day, r.month = nil, nil
	}
	s.settlePath(r, charged, used, at)
}

func (s *State) applyCommitted(e *Committed) {
	r := s.mustHeld(e.ReservationID)
	actual := e.Actual
	r.actual = &actual
	s.settle(r, ledger.StateCommitted, e.Charged, usedTokens(e.Usage, r.hold.tokens), e.At)
}

func (s *State) applyReleased(e *Released) {
	r := s.mustHeld(e.ReservationID)
	r.reason = e.Reason
	s.settle(r, e.State, 0, 0, e.At)
}

// applyForgotten drops reservations settled before before, and windows that ended by
// then and hold nothing.
func (s *State) applyForgotten(before time.Time) {
	for id, r := range s.reservations {
		if r.state != stateHeld && r.settledAt.Before(before) {
			delete(s.reservations, id)
			if s.byRequest[r.requestID] == r {
				delete(s.byRequest, r.requestID)
			}
		}
	}
	for _, k := range s.keys {
		k.windows.forget(before)
	}
	for _, p := range s.projects {
		p.windows.forget(before)
	}
	s.complete = false
}

// forgets reports whether Forget{Before: before} would drop anything.
func (s *State) forgets(before time.Time) bool {
	for _, r := range s.reservations {
		if r.state != stateHeld && r.settledAt.Before(before) {
			return true
		}
	}
	for _, k := range s.keys {
		if k.windows.forgets(before) {
			return true
		}
	}
	for _, p := range s.projects {
		if p.windows.forgets(before) {
			return true
		}
	}
	return false
}
