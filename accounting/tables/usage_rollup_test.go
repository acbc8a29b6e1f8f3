package tables_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// The materializer adds its charges to usage_daily itself (migration 0023), and says so
// in its transaction; the trigger on ledger_entries still rolls up the charges of any
// other writer, such as an earlier version's materializer during a rolling upgrade.
func TestUsageTriggerOnlyForOtherWriters(t *testing.T) {
	ctx := context.Background()
	pool := tablestest.NewPool(t, tablestest.NewDB(t), 2)
	account, key := uuid.NewString(), uuid.NewString()
	at := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	charge := func(tx pgx.Tx) {
		t.Helper()
		_, err := tx.Exec(ctx, `
			INSERT INTO ledger_entries (account_id, kind, amount, reservation_id, key_id, model, input_tokens,
				output_tokens, components, created_at)
			VALUES ($1, 'charge', -500, $2, $3, 'm', 10, 2, '[{"name":"cache_read","units":7,"price_per_mtok":1,"amount":0}]', $4)`,
			account, uuid.NewString(), key, at)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { charge(tx); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('ledger.usage_written', 'on', true)`); err != nil {
			return err
		}
		charge(tx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var requests, input, cacheRead, charged int64
	err := pool.QueryRow(ctx, `SELECT requests, input_tokens, cache_read_tokens, charged FROM usage_daily
		WHERE account_id = $1`, account).Scan(&requests, &input, &cacheRead, &charged)
	if err != nil {
		t.Fatal(err)
	}
	if requests != 1 || input != 10 || cacheRead != 7 || charged != 500 {
		t.Errorf("usage %d requests, %d input, %d cache read, %d charged; want the first charge alone",
			requests, input, cacheRead, charged)
	}
}
