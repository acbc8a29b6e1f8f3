package tables

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
)

const keyColumns = `k.id::text, k.account_id::text, k.name, k.prefix, k.allowed_models, k.daily_limit,
	k.monthly_limit, k.expires_at, k.admin_created, k.disabled, k.revoked_at IS NOT NULL, k.created_at,
	coalesce(k.project_id::text, ''), k.rpm, k.tpm`

func keyDest(k *ledger.Key) []any {
	return []any{&k.ID, &k.AccountID, &k.Name, &k.Prefix, &k.AllowedModels, &k.DailyLimit,
		&k.MonthlyLimit, &k.ExpiresAt, &k.AdminCreated, &k.Disabled, &k.Revoked, &k.CreatedAt,
		&k.ProjectID, &k.RPM, &k.TPM}
}

func normalizeKey(k *ledger.Key) {
	if len(k.AllowedModels) == 0 {
		k.AllowedModels = nil
	}
	k.ExpiresAt = utc(k.ExpiresAt)
	k.CreatedAt = k.CreatedAt.UTC()
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

// utc returns t in UTC, or nil.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
