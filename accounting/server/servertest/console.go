package servertest

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/llmgw/gateway/accounting/ledger"
)

// The console's listings and edits. Usage and LedgerEntries are not kept by the fake
// (it has no ledger entries): they fail with errors.ErrUnsupported.

// ListAccounts implements ledger.Store.
func (m *Memory) ListAccounts(_ context.Context, afterID string, limit int) ([]ledger.Account, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return nil, err
	}
	var out []ledger.Account
	// The fake's ids grow with creation: newest first is id descending.
	for id, a := range m.accounts {
		if afterID == "" || id < afterID {
			out = append(out, *a)
		}
	}
	slices.SortFunc(out, func(a, b ledger.Account) int { return strings.Compare(b.ID, a.ID) })
	return out[:min(limit, len(out))], nil
}

// ListKeys implements ledger.Store.
func (m *Memory) ListKeys(_ context.Context, accountID string) ([]ledger.Key, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return nil, err
	}
	if _, ok := m.accounts[accountID]; !ok {
		return nil, ledger.ErrNotFound
	}
	out := []ledger.Key{}
	for _, k := range m.keys {
		if k.AccountID == accountID {
			out = append(out, m.keyWithSpend(k))
		}
	}
	slices.SortFunc(out, func(a, b ledger.Key) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// UpdateKey implements ledger.Store.
func (m *Memory) UpdateKey(_ context.Context, u ledger.KeyUpdate) (ledger.Key, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.Key{}, err
	}
	k, ok := m.keys[u.ID]
	if !ok {
		return ledger.Key{}, ledger.ErrNotFound
	}
	if u.Name.Set {
		k.Name = u.Name.Value
	}
	if u.AllowedModels.Set {
		k.AllowedModels = slices.Clone(u.AllowedModels.Value)
	}
	if u.DailyLimit.Set {
		k.DailyLimit = u.DailyLimit.Value
	}
	if u.MonthlyLimit.Set {
		k.MonthlyLimit = u.MonthlyLimit.Value
	}
	if u.ExpiresAt.Set {
		k.ExpiresAt = u.ExpiresAt.Value
	}
	return m.keyWithSpend(k), nil
}

// Usage implements ledger.Store: unsupported by the fake.
func (m *Memory) Usage(context.Context, ledger.UsageQuery) (ledger.UsageReport, error) {
	return ledger.UsageReport{}, errors.ErrUnsupported
}

// LedgerEntries implements ledger.Store: unsupported by the fake.
func (m *Memory) LedgerEntries(context.Context, string, int64, int) ([]ledger.Entry, error) {
	return nil, errors.ErrUnsupported
}

// Reconcile implements ledger.Store: unsupported by the fake.
func (m *Memory) Reconcile(context.Context, ledger.ReconcileQuery) ([]ledger.ReconcileRow, error) {
	return nil, errors.ErrUnsupported
}

// memTiers are the tiers CreateAccount accepts.
var memTiers = []ledger.Tier{
	{Name: ledger.DefaultTier, RPMBeforeTopUp: 20, RPMAfterTopUp: 600, InFlightGeneral: 16, InFlightHighCost: 2},
	{Name: "enterprise", RPMBeforeTopUp: 600, RPMAfterTopUp: 6000, InFlightGeneral: 64, InFlightHighCost: 8},
	{Name: "tight", RPMBeforeTopUp: 3, RPMAfterTopUp: 3, InFlightGeneral: 2, InFlightHighCost: 1},
}

// Tiers implements ledger.Store.
func (m *Memory) Tiers(context.Context) ([]ledger.Tier, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return nil, err
	}
	return slices.Clone(memTiers), nil
}

// PutTier implements ledger.Store: it validates the tier and changes nothing.
func (m *Memory) PutTier(_ context.Context, t ledger.Tier) (ledger.Tier, error) {
	defer m.mu.Unlock()
	if err := m.lock(); err != nil {
		return ledger.Tier{}, err
	}
	return t, t.Validate()
}
