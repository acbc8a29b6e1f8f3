package machine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Alerts are facts of the decisions that cause them: the decision that pushes a key's
// or project's committed spend across a threshold of a window's limit, that takes an
// account's available credits (balance − held) below its low-balance threshold, or an
// operator's suspend, unsuspend or revoke, records an Alerted event in its own batch.
// What fired is state (a window's bits, an account's flag), so replaying the journal
// re-creates it and never a new alert: each alert is generated exactly once.

// Alert types, as webhooks name them.
const (
	AlertBalanceLow         = "balance.low"
	AlertBudgetThreshold    = "budget.threshold"
	AlertAccountSuspended   = "account.suspended"
	AlertAccountUnsuspended = "account.unsuspended"
	AlertKeyRevoked         = "key.revoked"
)

// AlertTypes are the types the ledger generates, in the order the docs list them.
var AlertTypes = []string{AlertBalanceLow, AlertBudgetThreshold, AlertAccountSuspended,
	AlertAccountUnsuspended, AlertKeyRevoked}

// Window names of budget.threshold alerts.
const (
	WindowDay      = "day"
	WindowMonth    = "month"
	WindowLifetime = "lifetime"
)

// thresholds are the percentages of a window's limit that alert, bit i for thresholds[i].
var thresholds = [...]int64{50, 80, 95, 100}

// Events.
type (
	// LowBalanceSet is an account's balance.low threshold (nil: none); it arms the alert.
	LowBalanceSet struct {
		AccountID string
		Threshold *ledger.Micros
		At        time.Time
	}
	// Alerted is one alert, recorded in the batch of the decision that caused it. KeyID
	// or ProjectID names a budget's owner; Window (with the day's or month's Start),
	// Percent, Limit and Spent describe a budget.threshold; Threshold and Available a
	// balance.low.
	Alerted struct {
		ID        string
		Type      string
		AccountID string
		KeyID     string
		ProjectID string
		Window    string
		Start     time.Time // zero for a lifetime
		Percent   int64
		Limit     ledger.Micros
		Spent     ledger.Micros
		Threshold ledger.Micros
		Available ledger.Micros
		At        time.Time
	}
)

func (LowBalanceSet) event() {}
func (Alerted) event()       {}

// alert records e with its id: derived from the count of alerts before it, its time,
// type and subject, so the same decisions give the same ids on every replica and a
// ledger started again from its tables (the count back at zero) gives new ones.
func (s *State) alert(e Alerted) Event {
	h := sha256.New()
	var n [16]byte
	binary.BigEndian.PutUint64(n[:8], s.alerts)
	binary.BigEndian.PutUint64(n[8:], uint64(e.At.UnixMicro()))
	h.Write(n[:])
	binary.BigEndian.PutUint64(n[:8], uint64(e.Start.UnixMicro()))
	h.Write(n[:8])
	for _, f := range []string{e.Type, e.AccountID, e.KeyID, e.ProjectID, e.Window} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	e.ID = "evt_" + hex.EncodeToString(h.Sum(nil)[:16])
	s.apply(e)
	return e
}

func (s *State) applyAlerted(e *Alerted) {
	s.alerts++
	a := s.mustAccount(e.AccountID)
	switch e.Type {
	case AlertBalanceLow:
		a.lowFired = true
	case AlertBudgetThreshold:
		if bit := thresholdBit(e.Percent); bit != 0 {
			if w := s.budgetWindow(e); w != nil {
				w.fired |= bit
			}
		}
	}
}

// budgetWindow is the window a budget.threshold alert fired in.
func (s *State) budgetWindow(e *Alerted) *window {
	period := periodDay
	if e.Window == WindowMonth {
		period = periodMonth
	}
	if e.KeyID != "" {
		if e.Window == WindowLifetime {
			return nil
		}
		return s.mustKey(e.KeyID).windows.at(period, e.Start)
	}
	p := s.mustProject(e.ProjectID)
	if e.Window == WindowLifetime {
		return &p.life
	}
	return p.windows.at(period, e.Start)
}

func thresholdBit(percent int64) uint8 {
	for i, t := range thresholds {
		if t == percent {
			return 1 << i
		}
	}
	return 0
}

// reached is the bits of the thresholds spent reaches of limit (none for a limit ≤ 0).
func reached(spent, limit ledger.Micros) uint8 {
	var bits uint8
	if limit <= 0 {
		return 0
	}
	for i, t := range thresholds {
		// ⌈limit × t / 100⌉ without overflow.
		if spent >= limit/100*t+(limit%100*t+99)/100 {
			bits |= 1 << i
		}
	}
	return bits
}

// budgetAlerts records the thresholds r's commit (charged > 0, already applied at at)
// made its key's and projects' windows reach for the first time. Windows are those of
// the reservation's creation time, where its charge counts.
func (s *State) budgetAlerts(r *reservation, k *key, at time.Time) []Event {
	var evs []Event
	fire := func(w *window, limit *ledger.Micros, name, keyID, projectID string) {
		if w == nil || limit == nil {
			return
		}
		fresh := reached(w.committed, *limit) &^ w.fired
		for i, t := range thresholds {
			if fresh&(1<<i) == 0 {
				continue
			}
			e := Alerted{Type: AlertBudgetThreshold, AccountID: k.acct.id, KeyID: keyID, ProjectID: projectID,
				Window: name, Start: w.start, Percent: t, Limit: *limit, Spent: w.committed, At: at}
			evs = append(evs, s.alert(e))
		}
	}
	day, month := dayStart(r.createdAt), monthStart(r.createdAt)
	fire(k.windows.at(periodDay, day), k.daily, WindowDay, k.id, "")
	fire(k.windows.at(periodMonth, month), k.monthly, WindowMonth, k.id, "")
	for _, p := range r.hold.path {
		if p == nil {
			break
		}
		fire(p.windows.at(periodDay, day), p.daily, WindowDay, "", p.id)
		fire(p.windows.at(periodMonth, month), p.monthly, WindowMonth, "", p.id)
		fire(&p.life, p.limit, WindowLifetime, "", p.id)
	}
	return evs
}

// lowBalanceAlert records a balance.low alert when a's available credits are below
// its armed threshold.
func (s *State) lowBalanceAlert(a *account, at time.Time) []Event {
	if a.lowBalance == nil || a.lowFired {
		return nil
	}
	available := a.balance - a.reserved
	if available >= *a.lowBalance {
		return nil
	}
	return []Event{s.alert(Alerted{Type: AlertBalanceLow, AccountID: a.id, Threshold: *a.lowBalance,
		Available: available, At: at})}
}

// rearm clears the fired bits of ws's windows of period that their spend no longer
// reaches under limit (a raised limit arms those thresholds again). A threshold a lowered
// limit makes reached fires at the next commit: alerts come from spend.
func rearm(ws []*window, period string, limit *ledger.Micros) {
	for _, w := range ws {
		if w.period != period {
			continue
		}
		if limit == nil {
			w.fired = 0
		} else {
			w.fired &= reached(w.committed, *limit)
		}
	}
}
