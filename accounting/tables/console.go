package tables

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
)

const accountColumns = `id::text, tier, label, balance, reserved, suspended, topped_up, in_flight, in_flight_high_cost, created_at, low_balance`

func scanAccount(row pgx.Row) (ledger.Account, error) {
	var a ledger.Account
	err := row.Scan(&a.ID, &a.Tier, &a.Label, &a.Balance, &a.Reserved, &a.Suspended, &a.ToppedUp,
		&a.InFlight, &a.InFlightHighCost, &a.CreatedAt, &a.LowBalance)
	a.CreatedAt = a.CreatedAt.UTC()
	return a, err
}

// MaxPage is the most rows one page of a listing returns.
const MaxPage = 1000

func checkPage(limit int) error {
	if limit < 1 || limit > MaxPage {
		return ledger.Refuse(ledger.ReasonInvalidArgument, "a page holds 1 to 1000 rows")
	}
	return nil
}

// ListAccounts returns up to q.Limit accounts, newest first, after the account q.AfterID
// in that order, whose label contains q.Label ignoring case (any label when empty). The
// cursor stays an account id: its creation time is looked up, so a cursor of an earlier
// page keeps working while accounts are created (they sort before it). Read through
// accounts_newest_first (migration 0011); a search filters that order, which is enough
// for an operator's console.
func (s *Store) ListAccounts(ctx context.Context, q ledger.AccountQuery) ([]ledger.Account, error) {
	if err := checkPage(q.Limit); err != nil {
		return nil, err
	}
	if q.AfterID != "" && !validID(q.AfterID) {
		return nil, ledger.Refuse(ledger.ReasonInvalidArgument, "the page cursor is not an account id")
	}
	rows, err := s.pool.Query(ctx, `SELECT `+accountColumns+` FROM accounts
		WHERE ($1::uuid IS NULL OR (created_at, id) < (SELECT created_at, id FROM accounts WHERE id = $1::uuid))
			AND ($3 = '' OR strpos(lower(label), lower($3)) > 0)
		ORDER BY created_at DESC, id DESC LIMIT $2`, nullIfEmpty(q.AfterID), q.Limit, q.Label)
	if err != nil {
		return nil, dbError("list accounts", err)
	}
	accounts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ledger.Account, error) { return scanAccount(r) })
	if err != nil {
		return nil, dbError("list accounts", err)
	}
	return accounts, nil
}

// ListKeys returns an account's keys, oldest first, with their spend in the current
// UTC day and month. An unknown account is ErrNotFound; an account without keys has
// an empty list.
func (s *Store) ListKeys(ctx context.Context, accountID string) ([]ledger.Key, error) {
	if err := s.accountExists(ctx, "list keys", accountID); err != nil {
		return nil, err
	}
	return s.queryKeys(ctx, "list keys", "", "api_keys", `WHERE k.account_id = $2 ORDER BY k.created_at, k.id`, accountID)
}

// usageGroups is the SQL of each UsageGroup's column.
// (a row's upstream model: its own only when grouped by channel).
var usageGroups = map[ledger.UsageGroup]struct{ group, upstream string }{
	ledger.ByModel:   {"model", "''"},
	ledger.ByKey:     {"key_id::text", "''"},
	ledger.ByDay:     {"to_char(day, 'YYYY-MM-DD')", "''"},
	ledger.ByChannel: {"channel", "upstream_model"},
	ledger.ByProject: {"project_id", "''"},
}

// Usage sums an account's charges from the daily rollup, which every charge updates
// in its own transaction: one rollup row per (day, key, model) in range is read, never
// the ledger. An unknown account, or a key not of the account, is ErrNotFound.
func (s *Store) Usage(ctx context.Context, q ledger.UsageQuery) (ledger.UsageReport, error) {
	group, ok := usageGroups[q.By]
	switch {
	case !ok:
		return ledger.UsageReport{}, ledger.Refuse(ledger.ReasonInvalidArgument, "unknown usage grouping")
	case q.To.Before(q.From):
		return ledger.UsageReport{}, ledger.Refuse(ledger.ReasonInvalidArgument, "the usage range ends before it starts")
	}
	if err := s.accountExists(ctx, "usage", q.AccountID); err != nil {
		return ledger.UsageReport{}, err
	}
	if q.KeyID != "" {
		if !validID(q.KeyID) {
			return ledger.UsageReport{}, ledger.ErrNotFound
		}
		var n int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE id = $1 AND account_id = $2`,
			q.KeyID, q.AccountID).Scan(&n)
		if err != nil || n == 0 {
			return ledger.UsageReport{}, notFoundOr("usage", err)
		}
	}
	tree, of, extra, err := s.projectFilter(ctx, q.AccountID, q.ProjectID)
	if err != nil {
		return ledger.UsageReport{}, err
	}
	rows, err := s.pool.Query(ctx, tree+`
		SELECT `+group.group+`, `+group.upstream+`, sum(requests), sum(input_tokens), sum(output_tokens),
			sum(cache_read_tokens), sum(cache_write_tokens), sum(charged)
		FROM usage_daily
		WHERE account_id = $1 AND day BETWEEN $2::date AND $3::date AND ($4::uuid IS NULL OR key_id = $4::uuid)`+of+`
		GROUP BY 1, 2 ORDER BY 1, 2`,
		append([]any{q.AccountID, day(q.From), day(q.To), nullIfEmpty(q.KeyID)}, extra...)...)
	if err != nil {
		return ledger.UsageReport{}, dbError("usage", err)
	}
	var r ledger.UsageReport
	r.Rows, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.UsageRow, error) {
		var u ledger.UsageRow
		err := row.Scan(&u.Group, &u.UpstreamModel, &u.Requests, &u.InputTokens, &u.OutputTokens,
			&u.CacheReadTokens, &u.CacheWriteTokens, &u.Charged)
		return u, err
	})
	if err != nil {
		return ledger.UsageReport{}, dbError("usage", err)
	}
	for _, u := range r.Rows {
		r.Total.Requests += u.Requests
		r.Total.InputTokens += u.InputTokens
		r.Total.OutputTokens += u.OutputTokens
		r.Total.CacheReadTokens += u.CacheReadTokens
		r.Total.CacheWriteTokens += u.CacheWriteTokens
		r.Total.Charged += u.Charged
	}
	return r, nil
}

// LedgerEntries returns up to limit of an account's entries with ids below beforeID
// (from the newest when 0), newest first. An unknown account is ErrNotFound.
func (s *Store) LedgerEntries(ctx context.Context, accountID string, beforeID int64, limit int) ([]ledger.Entry, error) {
	if err := checkPage(limit); err != nil {
		return nil, err
	}
	if beforeID < 0 {
		return nil, ledger.Refuse(ledger.ReasonInvalidArgument, "the page cursor is not an entry id")
	}
	if err := s.accountExists(ctx, "ledger entries", accountID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id, kind, amount, created_at, coalesce(reservation_id::text, ''), coalesce(key_id::text, ''),
			coalesce(model, ''), coalesce(input_tokens, 0), coalesce(output_tokens, 0), coalesce(channel, ''),
			coalesce(upstream_model, ''), components::text, coalesce(service_tier, '')
		FROM ledger_entries
		WHERE account_id = $1 AND ($2 = 0 OR id < $2)
		ORDER BY id DESC LIMIT $3`, accountID, beforeID, limit)
	if err != nil {
		return nil, dbError("ledger entries", err)
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ledger.Entry, error) {
		var e ledger.Entry
		var components *string
		if err := r.Scan(&e.ID, &e.Kind, &e.Amount, &e.CreatedAt, &e.ReservationID, &e.KeyID, &e.Model,
			&e.InputTokens, &e.OutputTokens, &e.Channel, &e.UpstreamModel, &components, &e.ServiceTier); err != nil {
			return e, err
		}
		e.CreatedAt = e.CreatedAt.UTC()
		var err error
		if components != nil {
			e.Components, err = componentsOf([]byte(*components))
		}
		return e, err
	})
	if err != nil {
		return nil, dbError("ledger entries", err)
	}
	return entries, nil
}

// accountExists is nil for an existing account, else ErrNotFound (or the failure).
func (s *Store) accountExists(ctx context.Context, op, id string) error {
	if !validID(id) {
		return ledger.ErrNotFound
	}
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM accounts WHERE id = $1`, id).Scan(&n)
	if err == nil && n == 0 {
		return ledger.ErrNotFound
	}
	return dbError(op, err)
}

// notFoundOr is the failure err when there is one, else ErrNotFound.
func notFoundOr(op string, err error) error {
	if err != nil {
		return dbError(op, err)
	}
	return ledger.ErrNotFound
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// day is t's UTC date as text for a ::date parameter.
func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }
