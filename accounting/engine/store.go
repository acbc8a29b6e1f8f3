package engine

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// Store is the ledger.Store the gRPC server uses: the ledger.Decisions from the Engine,
// the ledger.Reports from the derived tables (tables.Store) with the owner's balances
// and spend.
type Store struct {
	*Engine
	Reports ledger.Reports
}

var _ ledger.Store = Store{}

func (s Store) CreateAccount(ctx context.Context, na ledger.NewAccount) (ledger.Account, error) {
	a, err := s.change(ctx, machine.CreateAccount{ID: uuid.NewString(), Tier: na.Tier, Label: na.Label, At: s.now()})
	return a.Account, err
}

// GetAccount answers from the owner's state, once the derived tables hold what it
// shows (an operator who reads the account and then its statement sees both agree).
func (s Store) GetAccount(ctx context.Context, id string) (ledger.Account, error) {
	a, err := s.do(ctx, machine.GetAccount{AccountID: id})
	s.waitMaterialized(ctx)
	return a.Account, err
}

func (s Store) TopUp(ctx context.Context, id string, amount ledger.Micros, idem string) (ledger.Account, error) {
	a, err := s.change(ctx, machine.TopUp{AccountID: id, Amount: amount, IdempotencyKey: idem, At: s.now()})
	return a.Account, err
}

func (s Store) SetAccountSuspended(ctx context.Context, id string, suspended bool) (ledger.Account, error) {
	a, err := s.change(ctx, machine.SetAccountSuspended{AccountID: id, Suspended: suspended, At: s.now()})
	return a.Account, err
}

func (s Store) UpdateAccount(ctx context.Context, u ledger.AccountUpdate) (ledger.Account, error) {
	a, err := s.change(ctx, machine.UpdateAccount{Update: u, At: s.now()})
	return a.Account, err
}

func (s Store) CreateKey(ctx context.Context, k ledger.NewKey) (ledger.Key, error) {
	a, err := s.change(ctx, machine.CreateKey{ID: uuid.NewString(), Key: k, At: s.now()})
	return a.Key, err
}

// GetKey answers from the owner's state, once the derived tables hold what it shows.
func (s Store) GetKey(ctx context.Context, id string) (ledger.Key, error) {
	a, err := s.do(ctx, machine.GetKey{KeyID: id, At: s.now()})
	s.waitMaterialized(ctx)
	return a.Key, err
}

func (s Store) SetKeyDisabled(ctx context.Context, id string, disabled bool) (ledger.Key, error) {
	a, err := s.change(ctx, machine.SetKeyDisabled{KeyID: id, Disabled: disabled, At: s.now()})
	return a.Key, err
}

func (s Store) RevokeKey(ctx context.Context, id string) (ledger.Key, error) {
	a, err := s.change(ctx, machine.RevokeKey{KeyID: id, At: s.now()})
	return a.Key, err
}

func (s Store) UpdateKey(ctx context.Context, u ledger.KeyUpdate) (ledger.Key, error) {
	a, err := s.change(ctx, machine.UpdateKey{Update: u, At: s.now()})
	return a.Key, err
}

func (s Store) Authenticate(ctx context.Context, hash []byte) (ledger.Grant, error) {
	a, err := s.do(ctx, machine.Authenticate{Hash: hash, At: s.now()})
	return a.Grant, err
}

func (s Store) Reserve(ctx context.Context, r ledger.ReserveRequest) (ledger.Reservation, error) {
	if r.TTL <= 0 {
		r.TTL = s.opts.DefaultTTL
	}
	a, err := s.do(ctx, machine.Reserve{ID: uuid.Must(uuid.NewV7()).String(), Request: r, At: s.now()})
	return a.Reservation, err
}

func (s Store) Commit(ctx context.Context, c ledger.CommitRequest) (ledger.CommitResult, error) {
	a, err := s.do(ctx, machine.Commit{Request: c, At: s.now()})
	return a.Commit, err
}

func (s Store) Release(ctx context.Context, id, reason string) (ledger.ReleaseResult, error) {
	a, err := s.do(ctx, machine.Release{ReservationID: id, Reason: reason, At: s.now()})
	return a.Release, err
}

func (s Store) Renew(ctx context.Context, id string, ttl time.Duration) (time.Time, error) {
	if ttl <= 0 {
		ttl = s.opts.DefaultTTL
	}
	a, err := s.do(ctx, machine.Renew{ReservationID: id, TTL: ttl, At: s.now()})
	return a.Expires, err
}

// ExpireDue expires on the owner; on a standby there is nothing of its own to expire
// (the owner's sweeper does it), so it answers 0 rather than an error — also on one
// that owned the ledger before (fenced, or cut off from the database): its sweeper is
// no sign of what it can do.
func (s Store) ExpireDue(ctx context.Context, limit int) (int, error) {
	if !s.Owning() && !s.stopped() {
		return 0, nil
	}
	a, err := s.do(ctx, machine.ExpireDue{Limit: limit, At: s.now()})
	return a.Expired, err
}

// GraceLapsed gives every hold whose lease already ran out grace more, for the
// sweeper's first sweep after accounting was away (see the app's sweeper).
func (s Store) GraceLapsed(ctx context.Context, grace time.Duration) (int, error) {
	if !s.Owning() && !s.stopped() {
		return 0, nil
	}
	a, err := s.do(ctx, machine.GraceLapsed{Grace: grace, At: s.now()})
	return a.Expired, err
}

func (s Store) RecordVideoTask(ctx context.Context, taskID, keyID, model string, origin ledger.TaskOrigin) (ledger.VideoTask, error) {
	a, err := s.do(ctx, machine.RecordVideoTask{TaskID: taskID, KeyID: keyID, Model: model, Origin: origin, At: s.now()})
	return a.VideoTask, err
}

func (s Store) GetVideoTask(ctx context.Context, taskID string) (ledger.VideoTask, error) {
	a, err := s.do(ctx, machine.GetVideoTask{TaskID: taskID})
	return a.VideoTask, err
}

func (s Store) PutTier(ctx context.Context, t ledger.Tier) (ledger.Tier, error) {
	a, err := s.change(ctx, machine.PutTier{Tier: t, At: s.now()})
	return a.Tier, err
}

// ListAccounts lists from the derived tables once they hold every decision durable
// now, so a charge settled a moment ago shows.
func (s Store) ListAccounts(ctx context.Context, q ledger.AccountQuery) ([]ledger.Account, error) {
	s.waitMaterialized(ctx)
	return s.Reports.ListAccounts(ctx, q)
}

// ListKeys lists an account's keys, with their spend, from the derived tables once
// they hold every decision durable now.
func (s Store) ListKeys(ctx context.Context, accountID string) ([]ledger.Key, error) {
	s.waitMaterialized(ctx)
	return s.Reports.ListKeys(ctx, accountID)
}

func (s Store) Usage(ctx context.Context, q ledger.UsageQuery) (ledger.UsageReport, error) {
	s.waitMaterialized(ctx)
	return s.Reports.Usage(ctx, q)
}

func (s Store) LedgerEntries(ctx context.Context, accountID string, beforeID int64, limit int) ([]ledger.Entry, error) {
	s.waitMaterialized(ctx)
	return s.Reports.LedgerEntries(ctx, accountID, beforeID, limit)
}

func (s Store) Reconcile(ctx context.Context, q ledger.ReconcileQuery) ([]ledger.ReconcileRow, error) {
	s.waitMaterialized(ctx)
	return s.Reports.Reconcile(ctx, q)
}

// Tiers answers from the owner's state.
func (s Store) Tiers(ctx context.Context) ([]ledger.Tier, error) {
	a, err := s.do(ctx, machine.ListTiers{})
	return a.Tiers, err
}

// ArchiveSettled moves reservations settled after ago from the derived reservations
// table to its archive, when the reports are the PostgreSQL store's tables (the
// sweeper calls it as it did with the store).
func (s Store) ArchiveSettled(ctx context.Context, after time.Duration, limit int) (int, error) {
	a, ok := s.Reports.(interface {
		ArchiveSettled(context.Context, time.Duration, int) (int, error)
	})
	if !ok || !s.Owning() {
		return 0, nil
	}
	return a.ArchiveSettled(ctx, after, limit)
}

func (s Store) Changes(ctx context.Context) (<-chan ledger.Change, error) {
	return s.Reports.Changes(ctx)
}

// stopped reports whether Run returned: the engine answers nothing more.
func (s Store) stopped() bool {
	select {
	case <-s.Failed():
		return true
	default:
		return false
	}
}
