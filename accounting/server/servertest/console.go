package servertest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// The console's listings and edits. Usage and LedgerEntries are not kept by the fake
// (it has no ledger entries): they fail with errors.ErrUnsupported.

// ListAccounts implements ledger.Store: newest first, which for the fake's ids (they
// grow with creation) is id descending.
func (m *Memory) ListAccounts(_ context.Context, q ledger.AccountQuery) ([]ledger.Account, error) {
	defer m.mu.Unlock()
	if _, err := m.begin(); err != nil {
		return nil, err
	}
	var out []ledger.Account
	for _, a := range slices.Backward(m.state.Snapshot().Accounts) {
		if len(out) >= q.Limit {
			break
		}
		if (q.AfterID == "" || a.ID < q.AfterID) && strings.Contains(strings.ToLower(a.Label), strings.ToLower(q.Label)) {
			ans, _ := m.state.Decide(machine.GetAccount{AccountID: a.ID})
			out = append(out, ans.Account)
		}
	}
	return out, nil
}

// ListKeys implements ledger.Store: oldest (lowest id) first, with their spend.
func (m *Memory) ListKeys(_ context.Context, accountID string) ([]ledger.Key, error) {
	defer m.mu.Unlock()
	now, err := m.begin()
	if err != nil {
		return nil, err
	}
	if ans, _ := m.state.Decide(machine.GetAccount{AccountID: accountID}); ans.Err != nil {
		return nil, ans.Err
	}
	out := []ledger.Key{}
	for _, k := range m.state.Snapshot().Keys {
		if k.AccountID == accountID {
			ans, _ := m.state.Decide(machine.GetKey{KeyID: k.ID, At: now})
			out = append(out, own(ans.Key))
		}
	}
	return out, nil
}

// UpdateKey implements ledger.Store.
func (m *Memory) UpdateKey(_ context.Context, u ledger.KeyUpdate) (ledger.Key, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.UpdateKey{Update: u, At: at}
	})
	return own(a.Key), err
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

// Tiers implements ledger.Store.
func (m *Memory) Tiers(context.Context) ([]ledger.Tier, error) {
	a, err := m.read(machine.ListTiers{})
	return a.Tiers, err
}

// PutTier implements ledger.Store: it creates or changes the tier, and the accounts
// of that tier are held to its new limits at once.
func (m *Memory) PutTier(_ context.Context, t ledger.Tier) (ledger.Tier, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.PutTier{Tier: t, At: at}
	})
	return a.Tier, err
}
