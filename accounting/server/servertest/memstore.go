// Package servertest provides test helpers for code that talks to the accounting
// service: an in-memory ledger.Store fake with error injection, and a helper that
// serves it over real gRPC on loopback.
//
// The fake is for tests of callers (the gRPC adapter, gatewayctl, extproc). Its
// decisions are the ledger's own: every call is decided by the ledger's state machine
// (accounting/engine/machine) in memory, with its tiers, rate and in-flight limits,
// key spend windows and argument checks, but without a journal, an owner or derived
// tables: nothing is durable, Changes carries only what Emit sends, and the reports
// (Usage, LedgerEntries, Reconcile) are unsupported. The state machine and the
// PostgreSQL store have their own tests.
//
// Only tests import this package. It must not import more of the engine than its
// state machine: no journal, no database, no materializer.
package servertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// Memory is an in-memory ledger.Store deciding through machine.State. It is safe for
// concurrent use: one mutex orders every decision.
type Memory struct {
	mu    sync.Mutex
	state *machine.State
	seq   int // the last id handed out, whatever its prefix
	// errs are returned by the next store calls instead of doing them (FailNext).
	errs []error
	// feeds are the open Changes subscriptions.
	feeds []*feed
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

var _ ledger.Store = (*Memory)(nil)

// DefaultTTL is a reservation's lease when none is asked for: the ledger's.
const DefaultTTL = machine.DefaultTTL

// NewMemory returns an empty store with the ledger's built-in tiers (default, tight,
// enterprise).
func NewMemory() *Memory {
	return &Memory{state: machine.New()}
}

// FailNext makes the next store calls other than Changes return errs, one call each,
// in order.
func (m *Memory) FailNext(errs ...error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, errs...)
}

// begin takes the mutex and pops an injected error, if any; it returns the present
// time. Callers unlock.
func (m *Memory) begin() (time.Time, error) {
	m.mu.Lock()
	if len(m.errs) > 0 {
		err := m.errs[0]
		m.errs = m.errs[1:]
		return time.Time{}, err
	}
	if m.Now != nil {
		return m.Now(), nil
	}
	return time.Now(), nil
}

// decide decides the command cmd builds for the present time, unless an error was
// injected. With a prefix, cmd gets the id the next created thing takes (prefix and a
// six-digit sequence number shared by every prefix); the number is used up only when
// the decision created something.
func (m *Memory) decide(prefix string, cmd func(id string, at time.Time) machine.Command) (machine.Answer, error) {
	defer m.mu.Unlock()
	now, err := m.begin()
	if err != nil {
		return machine.Answer{}, err
	}
	id := ""
	if prefix != "" {
		id = fmt.Sprintf("%s_%06d", prefix, m.seq+1)
	}
	a, evs := m.state.Decide(cmd(id, now))
	if prefix != "" && len(evs) > 0 {
		m.seq++
	}
	return a, a.Err
}

// read decides a command that needs neither an id nor the time.
func (m *Memory) read(c machine.Command) (machine.Answer, error) {
	return m.decide("", func(string, time.Time) machine.Command { return c })
}

// own copies what an answer's key shares with the state, so a caller may change it.
func own(k ledger.Key) ledger.Key {
	k.AllowedModels = slices.Clone(k.AllowedModels)
	k.DailyLimit, k.MonthlyLimit, k.ExpiresAt = clone(k.DailyLimit), clone(k.MonthlyLimit), clone(k.ExpiresAt)
	k.RPM, k.TPM = clone(k.RPM), clone(k.TPM)
	return k
}

func clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// CreateAccount implements ledger.Store. Its ids are acct_ and a sequence number.
func (m *Memory) CreateAccount(_ context.Context, na ledger.NewAccount) (ledger.Account, error) {
	a, err := m.decide("acct", func(id string, at time.Time) machine.Command {
		return machine.CreateAccount{ID: id, Tier: na.Tier, Label: na.Label, At: at}
	})
	return a.Account, err
}

// GetAccount implements ledger.Store.
func (m *Memory) GetAccount(_ context.Context, id string) (ledger.Account, error) {
	a, err := m.read(machine.GetAccount{AccountID: id})
	return a.Account, err
}

// TopUp implements ledger.Store.
func (m *Memory) TopUp(_ context.Context, id string, amount ledger.Micros, idem string) (ledger.Account, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.TopUp{AccountID: id, Amount: amount, IdempotencyKey: idem, At: at}
	})
	return a.Account, err
}

// SetAccountSuspended implements ledger.Store.
func (m *Memory) SetAccountSuspended(_ context.Context, id string, suspended bool) (ledger.Account, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.SetAccountSuspended{AccountID: id, Suspended: suspended, At: at}
	})
	return a.Account, err
}

// UpdateAccount implements ledger.Store.
func (m *Memory) UpdateAccount(_ context.Context, u ledger.AccountUpdate) (ledger.Account, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.UpdateAccount{Update: u, At: at}
	})
	return a.Account, err
}

// CreateKey implements ledger.Store. Its ids are key_ and a sequence number.
func (m *Memory) CreateKey(_ context.Context, k ledger.NewKey) (ledger.Key, error) {
	a, err := m.decide("key", func(id string, at time.Time) machine.Command {
		return machine.CreateKey{ID: id, Key: k, At: at}
	})
	return own(a.Key), err
}

// HashOf returns the stored hash of a key, for tests that check what was stored.
func (m *Memory) HashOf(keyID string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.state.Snapshot().Keys {
		if k.ID == keyID {
			return k.Hash
		}
	}
	return nil
}

// GetKey implements ledger.Store.
func (m *Memory) GetKey(_ context.Context, id string) (ledger.Key, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.GetKey{KeyID: id, At: at}
	})
	return own(a.Key), err
}

// SetKeyDisabled implements ledger.Store.
func (m *Memory) SetKeyDisabled(_ context.Context, id string, disabled bool) (ledger.Key, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.SetKeyDisabled{KeyID: id, Disabled: disabled, At: at}
	})
	return own(a.Key), err
}

// RevokeKey implements ledger.Store.
func (m *Memory) RevokeKey(_ context.Context, id string) (ledger.Key, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.RevokeKey{KeyID: id, At: at}
	})
	return own(a.Key), err
}

// Authenticate implements ledger.Store.
func (m *Memory) Authenticate(_ context.Context, hash []byte) (ledger.Grant, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.Authenticate{Hash: hash, At: at}
	})
	g := a.Grant
	g.AllowedModels, g.EffectiveModels = slices.Clone(g.AllowedModels), slices.Clone(g.EffectiveModels)
	g.DailyLimit, g.MonthlyLimit, g.ExpiresAt = clone(g.DailyLimit), clone(g.MonthlyLimit), clone(g.ExpiresAt)
	return g, err
}

// Reserve implements ledger.Store. Its ids are res_ and a sequence number.
func (m *Memory) Reserve(_ context.Context, r ledger.ReserveRequest) (ledger.Reservation, error) {
	a, err := m.decide("res", func(id string, at time.Time) machine.Command {
		return machine.Reserve{ID: id, Request: r, At: at}
	})
	return a.Reservation, err
}

// Commit implements ledger.Store.
func (m *Memory) Commit(_ context.Context, c ledger.CommitRequest) (ledger.CommitResult, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.Commit{Request: c, At: at}
	})
	return a.Commit, err
}

// Release implements ledger.Store.
func (m *Memory) Release(_ context.Context, id, reason string) (ledger.ReleaseResult, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.Release{ReservationID: id, Reason: reason, At: at}
	})
	return a.Release, err
}

// Renew implements ledger.Store.
func (m *Memory) Renew(_ context.Context, id string, ttl time.Duration) (time.Time, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.Renew{ReservationID: id, TTL: ttl, At: at}
	})
	return a.Expires, err
}

// ExpireDue implements ledger.Store.
func (m *Memory) ExpireDue(_ context.Context, limit int) (int, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.ExpireDue{Limit: limit, At: at}
	})
	return a.Expired, err
}

// RecordVideoTask implements ledger.Store.
func (m *Memory) RecordVideoTask(_ context.Context, taskID, keyID, model string, origin ledger.TaskOrigin) (ledger.VideoTask, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.RecordVideoTask{TaskID: taskID, KeyID: keyID, Model: model, Origin: origin, At: at}
	})
	return a.VideoTask, err
}

// GetVideoTask implements ledger.Store.
func (m *Memory) GetVideoTask(_ context.Context, taskID string) (ledger.VideoTask, error) {
	a, err := m.read(machine.GetVideoTask{TaskID: taskID})
	return a.VideoTask, err
}
