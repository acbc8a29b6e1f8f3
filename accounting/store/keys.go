package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
)

const keyColumns = `k.id::text, k.account_id::text, k.name, k.prefix, k.allowed_models, k.daily_limit,
	k.monthly_limit, k.expires_at, k.admin_created, k.disabled, k.revoked_at IS NOT NULL, k.created_at`

func keyDest(k *ledger.Key) []any {
	return []any{&k.ID, &k.AccountID, &k.Name, &k.Prefix, &k.AllowedModels, &k.DailyLimit,
		&k.MonthlyLimit, &k.ExpiresAt, &k.AdminCreated, &k.Disabled, &k.Revoked, &k.CreatedAt}
}

func normalizeKey(k *ledger.Key) {
	if len(k.AllowedModels) == 0 {
		k.AllowedModels = nil
	}
	k.ExpiresAt = utc(k.ExpiresAt)
	k.CreatedAt = k.CreatedAt.UTC()
}

// CreateKey stores a key's hash and settings. An unknown account is ErrNotFound;
// negative limits or a hash that is not a SHA-256 are ReasonInvalidArgument; a hash
// already stored is ReasonAlreadyExists.
func (s *Store) CreateKey(ctx context.Context, nk ledger.NewKey) (ledger.Key, error) {
	switch {
	case len(nk.Hash) != sha256.Size:
		return ledger.Key{}, ledger.Refuse(ledger.ReasonInvalidArgument, "the key hash must be a SHA-256")
	case nk.DailyLimit != nil && *nk.DailyLimit < 0:
		return ledger.Key{}, ledger.Refuse(ledger.ReasonInvalidArgument, "the daily limit must not be negative")
	case nk.MonthlyLimit != nil && *nk.MonthlyLimit < 0:
		return ledger.Key{}, ledger.Refuse(ledger.ReasonInvalidArgument, "the monthly limit must not be negative")
	}
	if !validID(nk.AccountID) {
		return ledger.Key{}, ledger.ErrNotFound
	}
	models := nk.AllowedModels
	if models == nil {
		models = []string{}
	}
	var k ledger.Key
	err := s.pool.QueryRow(ctx, `
		INSERT INTO api_keys AS k (account_id, hash, prefix, name, allowed_models, daily_limit,
			monthly_limit, expires_at, admin_created, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10::timestamptz, now()))
		RETURNING `+keyColumns,
		nk.AccountID, nk.Hash, nk.Prefix, nk.Name, models, nk.DailyLimit, nk.MonthlyLimit,
		nk.ExpiresAt, nk.AdminCreated, s.now()).Scan(keyDest(&k)...)
	if err != nil {
		return ledger.Key{}, dbError("create key", err)
	}
	normalizeKey(&k)
	return k, nil
}

// keyWithSpend is the query of keys with their spend in the current UTC day and
// month: $1 is the clock (NULL: the database's), the CTE keys names the key rows, and
// the statement ends with the caller's WHERE/ORDER BY.
const keyWithSpend = `
		WITH now AS (SELECT coalesce($1::timestamptz, now()) AT TIME ZONE 'UTC' AS t)%s
		SELECT ` + keyColumns + `,
			coalesce(d.committed, 0), coalesce(d.held, 0), coalesce(m.committed, 0), coalesce(m.held, 0)
		FROM %s k
		CROSS JOIN now
		LEFT JOIN key_spend d ON d.key_id = k.id AND d.period = 'd' AND d.period_start = now.t::date
		LEFT JOIN key_spend m ON m.key_id = k.id AND m.period = 'm' AND m.period_start = date_trunc('month', now.t)::date
		`

func scanKeyWithSpend(row pgx.CollectableRow) (ledger.Key, error) {
	var k ledger.Key
	err := row.Scan(append(keyDest(&k), &k.SpentToday, &k.HeldToday, &k.SpentMonth, &k.HeldMonth)...)
	normalizeKey(&k)
	return k, err
}

// queryKeys runs keyWithSpend over the rows of from (a table, or the name of the CTE
// cte defines) filtered by tail, and returns the keys; args start at $2.
func (s *Store) queryKeys(ctx context.Context, op, cte, from, tail string, args ...any) ([]ledger.Key, error) {
	rows, err := s.pool.Query(ctx, fmt.Sprintf(keyWithSpend, cte, from)+tail, append([]any{s.now()}, args...)...)
	if err != nil {
		return nil, dbError(op, err)
	}
	keys, err := pgx.CollectRows(rows, scanKeyWithSpend)
	if err != nil {
		return nil, dbError(op, err)
	}
	return keys, nil
}

// oneKey returns the single key of queryKeys, or ErrNotFound.
func oneKey(keys []ledger.Key, err error) (ledger.Key, error) {
	if err != nil {
		return ledger.Key{}, err
	}
	if len(keys) == 0 {
		return ledger.Key{}, ledger.ErrNotFound
	}
	return keys[0], nil
}

// GetKey returns a key with its spend in the current UTC day and month: committed
// charges and amounts still held.
func (s *Store) GetKey(ctx context.Context, id string) (ledger.Key, error) {
	if !validID(id) {
		return ledger.Key{}, ledger.ErrNotFound
	}
	return oneKey(s.queryKeys(ctx, "get key", "", "api_keys", `WHERE k.id = $2`, id))
}

// SetKeyDisabled disables or re-enables a key; caches hear of it through Changes.
func (s *Store) SetKeyDisabled(ctx context.Context, id string, disabled bool) (ledger.Key, error) {
	return s.updateKey(ctx, "set key disabled", `UPDATE api_keys k SET disabled = $2 WHERE k.id = $1 RETURNING `+keyColumns, id, disabled)
}

// RevokeKey revokes a key for good (revoking again keeps the first revocation time);
// caches hear of it through Changes.
func (s *Store) RevokeKey(ctx context.Context, id string) (ledger.Key, error) {
	return s.updateKey(ctx, "revoke key", `UPDATE api_keys k SET revoked_at = coalesce(k.revoked_at, $2::timestamptz, now()) WHERE k.id = $1 RETURNING `+keyColumns, id, s.now())
}

func (s *Store) updateKey(ctx context.Context, op, sql string, id string, arg any) (ledger.Key, error) {
	if !validID(id) {
		return ledger.Key{}, ledger.ErrNotFound
	}
	var k ledger.Key
	if err := s.pool.QueryRow(ctx, sql, id, arg).Scan(keyDest(&k)...); err != nil {
		return ledger.Key{}, dbError(op, err)
	}
	normalizeKey(&k)
	return k, nil
}

// Authenticate resolves a key's SHA-256 into a Grant in one read-only query. A
// missing, disabled, revoked or expired key is refused with ReasonInvalidAPIKey;
// a suspended account is reported in the Grant, not refused here.
func (s *Store) Authenticate(ctx context.Context, hash []byte) (ledger.Grant, error) {
	invalid := ledger.Refuse(ledger.ReasonInvalidAPIKey, "unknown, disabled, revoked or expired key")
	if len(hash) != sha256.Size {
		return ledger.Grant{}, invalid
	}
	var (
		g      ledger.Grant
		usable bool
	)
	err := s.pool.QueryRow(ctx, `
		SELECT k.id::text, k.account_id::text, k.allowed_models, k.daily_limit, k.monthly_limit,
			k.expires_at, k.admin_created, a.tier, a.suspended, a.topped_up,
			NOT k.disabled AND k.revoked_at IS NULL
				AND (k.expires_at IS NULL OR k.expires_at > coalesce($2::timestamptz, now()))
		FROM api_keys k JOIN accounts a ON a.id = k.account_id
		WHERE k.hash = $1`, hash, s.now()).Scan(
		&g.KeyID, &g.AccountID, &g.AllowedModels, &g.DailyLimit, &g.MonthlyLimit,
		&g.ExpiresAt, &g.AdminCreated, &g.Tier, &g.AccountSuspended, &g.AccountToppedUp, &usable)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !usable) {
		return ledger.Grant{}, invalid
	}
	if err != nil {
		return ledger.Grant{}, dbError("authenticate", err)
	}
	if len(g.AllowedModels) == 0 {
		g.AllowedModels = nil
	}
	g.ExpiresAt = utc(g.ExpiresAt)
	return g, nil
}
