// Package servertest provides test helpers for code that talks to the accounting
// service: an in-memory ledger.Store fake with error injection, and a helper that
// serves it over real gRPC on loopback.
//
// The fake is for tests of callers (the gRPC adapter, gatewayctl, extproc); it keeps
// the ledger's visible behaviour (balances, holds, idempotent commits, key states) but
// none of its limits beyond credits and suspension, and it is not the ledger: the
// PostgreSQL store is, and it has its own tests.
package servertest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Memory is an in-memory ledger.Store. It is safe for concurrent use.
type Memory struct {
	mu       sync.Mutex
	seq      int
	accounts map[string]*ledger.Account
	keys     map[string]*memKey
	holds    map[string]*ledger.Reservation
	requests map[string]string // request id → reservation id
	topups   map[string]bool
	tasks    map[string]ledger.VideoTask
	// errs are returned by the next store calls instead of doing them (FailNext).
	errs []error
	// feeds are the open Changes subscriptions.
	feeds []*feed
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

type feed struct {
	in   chan ledger.Change
	done chan struct{}
}

type memKey struct {
	ledger.Key
	hash []byte
}

var _ ledger.Store = (*Memory)(nil)

// DefaultTTL is the fake's reservation lifetime when none is asked for.
const DefaultTTL = 10 * time.Minute

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{
		accounts: map[string]*ledger.Account{},
		keys:     map[string]*memKey{},
		holds:    map[string]*ledger.Reservation{},
		requests: map[string]string{},
		topups:   map[string]bool{},
		tasks:    map[string]ledger.VideoTask{},
	}
}

// FailNext makes the next store calls other than Changes return errs, one call each,
// in order.
func (m *Memory) FailNext(errs ...error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, errs...)
}

// Emit delivers c to every open Changes feed, blocking until each took it.
func (m *Memory) Emit(c ledger.Change) {
	m.mu.Lock()
	feeds := append([]*feed(nil), m.feeds...)
	m.mu.Unlock()
	for _, f := range feeds {
		select {
		case f.in <- c:
		case <-f.done:
		}
	}
}

// Feeds returns how many Changes feeds are open.
func (m *Memory) Feeds() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.feeds)
}

// lock takes the mutex and pops an injected error, if any; callers must unlock.
func (m *Memory) lock() error {
	m.mu.Lock()
	if len(m.errs) > 0 {
		err := m.errs[0]
		m.errs = m.errs[1:]
		return err
	}
	return nil
}

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Memory) id(prefix string) string {
	m.seq++
	return fmt.Sprintf("%s_%06d", prefix, m.seq)
}

// CreateAccount implements ledger.Store. Tiers other than default (also when empty),
// tight and enterprise are refused with ReasonInvalidArgument.
func (m *Memory) CreateAccount(_ context.Context, tier string) (ledger.Account, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.Account{}, err
	}
	if tier == "" {
		tier = ledger.DefaultTier
	}
	switch tier {
	case ledger.DefaultTier, "tight", "enterprise":
	default:
		return ledger.Account{}, ledger.Refuse(ledger.ReasonInvalidArgument, "unknown tier "+tier)
	}
	a := &ledger.Account{ID: m.id("acct"), Tier: tier, CreatedAt: m.now().UTC()}
	m.accounts[a.ID] = a
	return *a, nil
}

// GetAccount implements ledger.Store.
func (m *Memory) GetAccount(_ context.Context, id string) (ledger.Account, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.Account{}, err
	}
	a, ok := m.accounts[id]
	if !ok {
		return ledger.Account{}, ledger.ErrNotFound
	}
	return *a, nil
}

// TopUp implements ledger.Store.
func (m *Memory) TopUp(_ context.Context, id string, amount ledger.Micros, idem string) (ledger.Account, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.Account{}, err
	}
	a, ok := m.accounts[id]
	if !ok {
		return ledger.Account{}, ledger.ErrNotFound
	}
	if idem != "" {
		if m.topups[id+"\x00"+idem] {
			return *a, nil
		}
		m.topups[id+"\x00"+idem] = true
	}
	a.Balance += amount
	a.ToppedUp = true
	return *a, nil
}

// SetAccountSuspended implements ledger.Store.
func (m *Memory) SetAccountSuspended(_ context.Context, id string, suspended bool) (ledger.Account, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.Account{}, err
	}
	a, ok := m.accounts[id]
	if !ok {
		return ledger.Account{}, ledger.ErrNotFound
	}
	a.Suspended = suspended
	return *a, nil
}

// CreateKey implements ledger.Store.
func (m *Memory) CreateKey(_ context.Context, k ledger.NewKey) (ledger.Key, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.Key{}, err
	}
	if _, ok := m.accounts[k.AccountID]; !ok {
		return ledger.Key{}, ledger.ErrNotFound
	}
	for _, other := range m.keys {
		if bytes.Equal(other.hash, k.Hash) {
			return ledger.Key{}, ledger.Refuse(ledger.ReasonAlreadyExists, "key hash exists")
		}
	}
	key := &memKey{Key: ledger.Key{
		ID: m.id("key"), AccountID: k.AccountID, Name: k.Name, Prefix: k.Prefix,
		AllowedModels: k.AllowedModels, DailyLimit: k.DailyLimit, MonthlyLimit: k.MonthlyLimit,
		ExpiresAt: k.ExpiresAt, AdminCreated: k.AdminCreated, CreatedAt: m.now().UTC(),
	}, hash: append([]byte(nil), k.Hash...)}
	m.keys[key.ID] = key
	return key.Key, nil
}

// HashOf returns the stored hash of a key, for tests that check what was stored.
func (m *Memory) HashOf(keyID string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k, ok := m.keys[keyID]; ok {
		return append([]byte(nil), k.hash...)
	}
	return nil
}

func (m *Memory) keyWithSpend(k *memKey) ledger.Key {
	out := k.Key
	for _, r := range m.holds {
		if r.KeyID != k.ID {
			continue
		}
		switch r.State {
		case ledger.StateHeld:
			out.HeldToday += r.Amount
			out.HeldMonth += r.Amount
		case ledger.StateCommitted:
			out.SpentToday += r.Charged
			out.SpentMonth += r.Charged
		}
	}
	return out
}

// GetKey implements ledger.Store.
func (m *Memory) GetKey(_ context.Context, id string) (ledger.Key, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.Key{}, err
	}
	k, ok := m.keys[id]
	if !ok {
		return ledger.Key{}, ledger.ErrNotFound
	}
	return m.keyWithSpend(k), nil
}

// SetKeyDisabled implements ledger.Store.
func (m *Memory) SetKeyDisabled(_ context.Context, id string, disabled bool) (ledger.Key, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.Key{}, err
	}
	k, ok := m.keys[id]
	if !ok {
		return ledger.Key{}, ledger.ErrNotFound
	}
	k.Disabled = disabled
	return m.keyWithSpend(k), nil
}

// RevokeKey implements ledger.Store.
func (m *Memory) RevokeKey(_ context.Context, id string) (ledger.Key, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.Key{}, err
	}
	k, ok := m.keys[id]
	if !ok {
		return ledger.Key{}, ledger.ErrNotFound
	}
	k.Revoked = true
	return m.keyWithSpend(k), nil
}

// Authenticate implements ledger.Store.
func (m *Memory) Authenticate(_ context.Context, hash []byte) (ledger.Grant, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.Grant{}, err
	}
	for _, k := range m.keys {
		if !bytes.Equal(k.hash, hash) {
			continue
		}
		if k.Disabled || k.Revoked || (k.ExpiresAt != nil && !m.now().Before(*k.ExpiresAt)) {
			break
		}
		a := m.accounts[k.AccountID]
		return ledger.Grant{
			KeyID: k.ID, AccountID: k.AccountID, AllowedModels: k.AllowedModels,
			DailyLimit: k.DailyLimit, MonthlyLimit: k.MonthlyLimit, ExpiresAt: k.ExpiresAt,
			AdminCreated: k.AdminCreated, Tier: a.Tier, AccountSuspended: a.Suspended,
			AccountToppedUp: a.ToppedUp,
		}, nil
	}
	return ledger.Grant{}, ledger.Refuse(ledger.ReasonInvalidAPIKey, "")
}

// Reserve implements ledger.Store: it checks the key, suspension and available
// credits, and is idempotent by request id.
func (m *Memory) Reserve(_ context.Context, r ledger.ReserveRequest) (ledger.Reservation, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.Reservation{}, err
	}
	if id, ok := m.requests[r.RequestID]; ok {
		return *m.holds[id], nil
	}
	k, ok := m.keys[r.KeyID]
	if !ok || k.Disabled || k.Revoked {
		return ledger.Reservation{}, ledger.Refuse(ledger.ReasonInvalidAPIKey, "")
	}
	a := m.accounts[k.AccountID]
	if a.Suspended {
		return ledger.Reservation{}, ledger.Refuse(ledger.ReasonAccountSuspended, "")
	}
	if r.Amount > a.Available() {
		return ledger.Reservation{}, ledger.Refuse(ledger.ReasonInsufficientCredits, "")
	}
	now := m.now().UTC()
	if r.TTL == 0 {
		r.TTL = DefaultTTL
	}
	res := &ledger.Reservation{
		ID: m.id("res"), AccountID: a.ID, KeyID: k.ID, Model: r.Model, Amount: r.Amount,
		Pool: r.Pool, State: ledger.StateHeld, CreatedAt: now, ExpiresAt: now.Add(r.TTL),
	}
	a.Reserved += r.Amount
	a.InFlight++
	if r.Pool == ledger.PoolHighCost {
		a.InFlightHighCost++
	}
	m.holds[res.ID] = res
	m.requests[r.RequestID] = res.ID
	return *res, nil
}

func (m *Memory) settle(res *ledger.Reservation, state ledger.ReservationState, charge ledger.Micros) {
	a := m.accounts[res.AccountID]
	a.Reserved -= res.Amount
	a.Balance -= charge
	a.InFlight--
	if res.Pool == ledger.PoolHighCost {
		a.InFlightHighCost--
	}
	res.State, res.Charged = state, charge
}

// Commit implements ledger.Store.
func (m *Memory) Commit(_ context.Context, c ledger.CommitRequest) (ledger.CommitResult, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.CommitResult{}, err
	}
	res, ok := m.holds[c.ReservationID]
	if !ok {
		return ledger.CommitResult{}, ledger.ErrNotFound
	}
	switch res.State {
	case ledger.StateCommitted:
		return ledger.CommitResult{Charged: res.Charged, Capped: res.Charged < c.Actual, Replayed: true}, nil
	case ledger.StateReleased, ledger.StateExpired:
		return ledger.CommitResult{}, ledger.Refuse(ledger.ReasonReservationSettled, "")
	}
	charge := min(c.Actual, res.Amount)
	m.settle(res, ledger.StateCommitted, charge)
	return ledger.CommitResult{Charged: charge, Capped: c.Actual > res.Amount}, nil
}

// Release implements ledger.Store.
func (m *Memory) Release(_ context.Context, id, _ string) (ledger.ReleaseResult, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.ReleaseResult{}, err
	}
	res, ok := m.holds[id]
	if !ok {
		return ledger.ReleaseResult{}, ledger.ErrNotFound
	}
	if res.State == ledger.StateHeld {
		m.settle(res, ledger.StateReleased, 0)
	}
	return ledger.ReleaseResult{State: res.State, Charged: res.Charged}, nil
}

// Renew implements ledger.Store.
func (m *Memory) Renew(_ context.Context, id string, ttl time.Duration) (time.Time, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return time.Time{}, err
	}
	res, ok := m.holds[id]
	if !ok {
		return time.Time{}, ledger.ErrNotFound
	}
	if res.State != ledger.StateHeld {
		return time.Time{}, ledger.Refuse(ledger.ReasonReservationSettled, "")
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	res.ExpiresAt = m.now().UTC().Add(ttl)
	return res.ExpiresAt, nil
}

// ExpireDue implements ledger.Store.
func (m *Memory) ExpireDue(_ context.Context, limit int) (int, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return 0, err
	}
	n := 0
	now := m.now()
	for _, res := range m.holds {
		if n >= limit {
			break
		}
		if res.State == ledger.StateHeld && !now.Before(res.ExpiresAt) {
			m.settle(res, ledger.StateExpired, 0)
			n++
		}
	}
	return n, nil
}

// RecordVideoTask implements ledger.Store.
func (m *Memory) RecordVideoTask(_ context.Context, taskID, keyID, model string, origin ledger.TaskOrigin) (ledger.VideoTask, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.VideoTask{}, err
	}
	k, ok := m.keys[keyID]
	if !ok {
		return ledger.VideoTask{}, ledger.ErrNotFound
	}
	if _, dup := m.tasks[taskID]; dup {
		return ledger.VideoTask{}, ledger.Refuse(ledger.ReasonAlreadyExists, "task exists")
	}
	t := ledger.VideoTask{TaskID: taskID, AccountID: k.AccountID, KeyID: keyID,
		AdminCreatedKey: k.AdminCreated, Model: model, CreatedAt: m.now().UTC(), Origin: origin}
	if t.Origin.UpstreamTaskID == "" {
		t.Origin.UpstreamTaskID = taskID
	}
	m.tasks[taskID] = t
	return t, nil
}

// GetVideoTask implements ledger.Store.
func (m *Memory) GetVideoTask(_ context.Context, taskID string) (ledger.VideoTask, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.VideoTask{}, err
	}
	t, ok := m.tasks[taskID]
	if !ok {
		return ledger.VideoTask{}, ledger.ErrNotFound
	}
	return t, nil
}

// Changes implements ledger.Store: the feed starts with a RESET, then carries what
// Emit sends, until ctx ends. It never takes an error queued by FailNext (a hub
// subscribes at a time of its own choosing).
func (m *Memory) Changes(ctx context.Context) (<-chan ledger.Change, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := &feed{in: make(chan ledger.Change), done: make(chan struct{})}
	out := make(chan ledger.Change, 1)
	out <- ledger.Change{Kind: ledger.ChangeReset}
	m.feeds = append(m.feeds, f)
	go func() {
		defer close(out)
		defer m.removeFeed(f)
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-f.in:
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func (m *Memory) removeFeed(f *feed) {
	close(f.done)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, g := range m.feeds {
		if g == f {
			m.feeds = append(m.feeds[:i], m.feeds[i+1:]...)
			return
		}
	}
}
