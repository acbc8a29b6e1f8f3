package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
)

const accountColumns = `id::text, tier, label, balance, reserved, suspended, topped_up, in_flight, in_flight_high_cost, created_at`

func scanAccount(row pgx.Row) (ledger.Account, error) {
	var a ledger.Account
	err := row.Scan(&a.ID, &a.Tier, &a.Label, &a.Balance, &a.Reserved, &a.Suspended, &a.ToppedUp,
		&a.InFlight, &a.InFlightHighCost, &a.CreatedAt)
	a.CreatedAt = a.CreatedAt.UTC()
	return a, err
}

// CreateAccount creates an empty account in its tier (ledger.DefaultTier when empty). An
// unknown tier is refused with ReasonInvalidArgument.
func (s *Store) CreateAccount(ctx context.Context, na ledger.NewAccount) (ledger.Account, error) {
	tier := na.Tier
	if tier == "" {
		tier = ledger.DefaultTier
	}
	a, err := scanAccount(s.pool.QueryRow(ctx, `
		INSERT INTO accounts (tier, label, created_at)
		SELECT name, $3, coalesce($2::timestamptz, now()) FROM tiers WHERE name = $1
		RETURNING `+accountColumns, tier, s.now(), na.Label))
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Account{}, ledger.Refuse(ledger.ReasonInvalidArgument, "unknown tier "+tier)
	}
	if err != nil {
		return ledger.Account{}, dbError("create account", err)
	}
	return a, nil
}

// GetAccount returns an account's balance, holds, pools and flags.
func (s *Store) GetAccount(ctx context.Context, id string) (ledger.Account, error) {
	if !validID(id) {
		return ledger.Account{}, ledger.ErrNotFound
	}
	a, err := scanAccount(s.pool.QueryRow(ctx, `SELECT `+accountColumns+` FROM accounts WHERE id = $1`, id))
	if err != nil {
		return ledger.Account{}, dbError("get account", err)
	}
	return a, nil
}

// TopUp appends a top-up entry of amount (> 0) to the ledger and adds it to the
// balance in the same transaction, and marks the account topped up. A non-empty
// idempotencyKey already used for this account adds nothing and returns the account
// as it is (whatever the amount of the retry).
func (s *Store) TopUp(ctx context.Context, accountID string, amount ledger.Micros, idempotencyKey string) (ledger.Account, error) {
	if amount <= 0 {
		return ledger.Account{}, ledger.Refuse(ledger.ReasonInvalidArgument, "a top-up amount must be positive")
	}
	if !validID(accountID) {
		return ledger.Account{}, ledger.ErrNotFound
	}
	a, err := scanAccount(s.pool.QueryRow(ctx,
		`SELECT `+accountColumns+` FROM ledger_top_up($1, $2, $3, $4)`,
		accountID, amount, idempotencyKey, s.now()))
	if err != nil {
		return ledger.Account{}, dbError("top up", err)
	}
	return a, nil
}

// SetAccountSuspended suspends or unsuspends an account; caches hear of it through
// Changes.
func (s *Store) SetAccountSuspended(ctx context.Context, accountID string, suspended bool) (ledger.Account, error) {
	if !validID(accountID) {
		return ledger.Account{}, ledger.ErrNotFound
	}
	a, err := scanAccount(s.pool.QueryRow(ctx,
		`UPDATE accounts SET suspended = $2 WHERE id = $1 RETURNING `+accountColumns, accountID, suspended))
	if err != nil {
		return ledger.Account{}, dbError("set account suspended", err)
	}
	return a, nil
}

// UpdateAccount changes the settings u sets (the label: a plain column write).
func (s *Store) UpdateAccount(ctx context.Context, u ledger.AccountUpdate) (ledger.Account, error) {
	if !validID(u.ID) {
		return ledger.Account{}, ledger.ErrNotFound
	}
	a, err := scanAccount(s.pool.QueryRow(ctx, `
		UPDATE accounts SET label = CASE WHEN $2 THEN $3 ELSE label END WHERE id = $1
		RETURNING `+accountColumns, u.ID, u.Label.Set, u.Label.Value))
	if err != nil {
		return ledger.Account{}, dbError("update account", err)
	}
	return a, nil
}

// utc returns t in UTC, or nil.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
