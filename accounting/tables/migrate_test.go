package tables_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// Several processes starting at once on a missing database: each creates it if
// needed and migrates it; the advisory lock makes them apply each migration once.
func TestEnsureDatabaseAndMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := tablestest.EmptyDB(t)

	const procs = 4
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for i := range procs {
		wg.Go(func() {
			if err := tables.EnsureDatabase(ctx, url); err != nil {
				errs[i] = err
				return
			}
			s, err := tables.Open(ctx, url, tables.Options{})
			if err != nil {
				errs[i] = err
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	if err := tables.EnsureDatabase(ctx, url); err != nil {
		t.Fatalf("EnsureDatabase on an existing database: %v", err)
	}

	pool := tablestest.NewPool(t, url, 2)
	v, err := tables.SchemaVersion(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if want := countMigrations(t); v != want {
		t.Errorf("schema version = %d, want %d", v, want)
	}
	// Migrating again is a no-op.
	if err := tables.Migrate(ctx, pool); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}

	rows, err := pool.Query(ctx, `SELECT name, rpm_before_topup, rpm_after_topup, in_flight_general, in_flight_high_cost
		FROM tiers ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	tiers, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ledger.Tier])
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.Tier{ // docs/local-stack.md's tiers table
		{Name: "default", RPMBeforeTopUp: 20, RPMAfterTopUp: 600, InFlightGeneral: 16, InFlightHighCost: 2},
		{Name: "enterprise", RPMBeforeTopUp: 600, RPMAfterTopUp: 6000, InFlightGeneral: 64, InFlightHighCost: 8},
		{Name: "tight", RPMBeforeTopUp: 3, RPMAfterTopUp: 3, InFlightGeneral: 2, InFlightHighCost: 1},
	}
	if diff := cmp.Diff(want, tiers); diff != "" {
		t.Errorf("seeded tiers (-want +got):\n%s", diff)
	}
}

// createdEmptyDB returns the URL of a new database with no schema (EmptyDB, created).
func createdEmptyDB(t *testing.T) string {
	t.Helper()
	url := tablestest.EmptyDB(t)
	if err := tables.EnsureDatabase(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	return url
}

// poolAt returns a pool of maxConns connections to a new database migrated up to and
// including migration version.
func poolAt(t *testing.T, version int, maxConns int32) *pgxpool.Pool {
	t.Helper()
	pool := tablestest.NewPool(t, createdEmptyDB(t), maxConns)
	if err := tables.MigrateTo(context.Background(), pool, version); err != nil {
		t.Fatal(err)
	}
	return pool
}

// txAt returns a pool on a new database migrated up to version, and a transaction on it
// that has run sql (rolled back at the end of the test unless committed).
func txAt(t *testing.T, version int, maxConns int32, sql string) (*pgxpool.Pool, pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	pool := poolAt(t, version, maxConns)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
	return pool, tx
}

func countMigrations(t *testing.T) int {
	t.Helper()
	entries, err := tables.MigrationFiles()
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func TestLedgerIsAppendOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	a := f.account(t, "default", 1_000_000)
	f.caughtUp(t)
	ctx := context.Background()
	for _, sql := range []string{
		"UPDATE ledger_entries SET amount = amount * 2",
		"DELETE FROM ledger_entries",
		"TRUNCATE ledger_entries CASCADE",
	} {
		if _, err := f.pool.Exec(ctx, sql); err == nil {
			t.Errorf("%s: succeeded, want refused", sql)
		}
	}
	f.caughtUp(t)
	var balance int64
	if err := f.pool.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = $1`, a.ID).Scan(&balance); err != nil {
		t.Fatal(err)
	}
	if got := balance; got != 1_000_000 {
		t.Errorf("balance = %d, want 1000000", got)
	}
	f.checkInvariants(t)
}

// A database with charges made before the usage rollup existed gets them in the rollup
// when it migrates: usage equals the ledger's charges from the first report on.
func TestUsageRollupBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := createdEmptyDB(t)
	pool := tablestest.NewPool(t, url, 2)
	first, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{string(first),
		`CREATE TABLE public.ledger_schema_version (version int4 NOT NULL)`,
		`INSERT INTO public.ledger_schema_version VALUES (1)`} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var acct, key string
	err = pool.QueryRow(ctx, `INSERT INTO accounts (tier) VALUES ('default') RETURNING id::text`).Scan(&acct)
	if err == nil {
		_, err = pool.Exec(ctx, `SELECT ledger_top_up($1, 10000000, '', NULL)`, acct)
	}
	if err == nil {
		err = pool.QueryRow(ctx, `INSERT INTO api_keys (account_id, hash) VALUES ($1, sha256('k')) RETURNING id::text`, acct).Scan(&key)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, when := range []time.Time{t0, t0.Add(time.Minute), t0.Add(24 * time.Hour)} {
		var id string
		err := pool.QueryRow(ctx, `SELECT o_id::text FROM ledger_reserve($1, $2, 'demo-chat', 1000, 1::smallint, '1 minute', $3)`,
			fmt.Sprint("backfill-", i), key, when).Scan(&id)
		if err == nil {
			_, err = pool.Exec(ctx, `SELECT ledger_commit($1, $2, 10, 20, NULL, '', '', $3)`, id, 100*(i+1), when)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := tables.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := tablestest.CheckInvariants(ctx, pool); err != nil {
		t.Fatal(err)
	}
	r, err := tables.New(pool, tables.Options{}).Usage(ctx, ledger.UsageQuery{AccountID: acct, From: t0, To: t0.Add(24 * time.Hour), By: ledger.ByDay})
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.UsageReport{
		Rows: []ledger.UsageRow{
			{Group: "2026-03-14", Requests: 2, InputTokens: 20, OutputTokens: 40, Charged: 300},
			{Group: "2026-03-15", Requests: 1, InputTokens: 10, OutputTokens: 20, Charged: 300},
		},
		Total: ledger.UsageRow{Requests: 3, InputTokens: 30, OutputTokens: 60, Charged: 600},
	}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("usage after the backfill (-want +got):\n%s", diff)
	}
}

// MigrateTo stops at the migration asked for, Migrate then applies the rest, and asking
// for an earlier one afterwards changes nothing (migrations are never undone).
func TestMigrateTo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := createdEmptyDB(t)
	pool := tablestest.NewPool(t, url, 2)
	version := func() int {
		t.Helper()
		v, err := tables.SchemaVersion(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := tables.MigrateTo(ctx, pool, 2); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != 2 {
		t.Errorf("after MigrateTo 2: version %d", v)
	}
	if err := tables.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	all := countMigrations(t)
	if v := version(); v != all {
		t.Errorf("after Migrate: version %d, want %d", v, all)
	}
	if err := tables.MigrateTo(ctx, pool, 2); err != nil {
		t.Errorf("MigrateTo an earlier version: %v", err)
	}
	if v := version(); v != all {
		t.Errorf("after MigrateTo an earlier version: version %d, want %d", v, all)
	}
	if err := tables.MigrateTo(ctx, pool, all+1); err == nil {
		t.Error("MigrateTo a migration that does not exist: no error")
	}
}

// The update-heavy tables keep free room on their pages for HOT updates, and the hot
// tables are vacuumed more often than the server's default (0004_storage.sql).
func TestStorageSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := tablestest.NewPool(t, tablestest.NewDB(t), 2)
	want := map[string][]string{
		"accounts":       {"fillfactor=50", "autovacuum_vacuum_scale_factor=0"},
		"key_spend":      {"fillfactor=70", "autovacuum_vacuum_scale_factor=0"},
		"usage_daily":    {"fillfactor=70", "autovacuum_vacuum_scale_factor=0"},
		"reservations":   {"autovacuum_vacuum_scale_factor=0.01", "autovacuum_vacuum_insert_scale_factor=0.01"},
		"ledger_entries": {"autovacuum_vacuum_insert_scale_factor=0.01"},
	}
	for table, opts := range want {
		var got []string
		if err := pool.QueryRow(ctx, "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE relname = $1 AND relkind = 'r'",
			table).Scan(&got); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		for _, o := range opts {
			if !slices.Contains(got, o) {
				t.Errorf("%s: options %v, want %s among them", table, got, o)
			}
		}
	}
}

// Migrations wait for the locks they need however short the pool's lock timeout: they
// run on a connection without it, also after the first migration of a run (tern resets
// the session after each one, which on a pool connection brought the pool's timeouts
// back: 0004, the second of this run, then gave up on accounts' lock after 20 ms).
func TestMigrationsWaitForLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := createdEmptyDB(t)
	pool := tablestest.NewPoolWith(t, url, tables.Options{MaxConns: 2, LockTimeout: 20 * time.Millisecond})
	if err := tables.MigrateTo(ctx, pool, 2); err != nil {
		t.Fatal(err)
	}
	// Another session holds a lock that 0004's ALTER TABLE accounts waits for.
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "LOCK TABLE accounts IN SHARE UPDATE EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(500*time.Millisecond, func() { _ = holder.Rollback(ctx) })
	if err := tables.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate while a lock is held for 500 ms: %v", err)
	}
	if v, err := tables.SchemaVersion(ctx, pool); err != nil || v != countMigrations(t) {
		t.Errorf("schema version %d, %v; want %d", v, err, countMigrations(t))
	}
}

// 0009 waits for the statements running since before it, not for a session idle in an
// open transaction (it runs no call of the old function; a call it makes later runs the
// new one). Only 0009 is run: a later migration that adds a column (0016) takes the
// table's exclusive lock, which does wait for a transaction that read it.
func TestTopUpConstraintDropIgnoresIdleTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := txAt(t, 8, 2, "SELECT count(*) FROM accounts")
	migrateCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := tables.MigrateTo(migrateCtx, pool, 9); err != nil {
		t.Fatalf("Migrate beside a session idle in a transaction: %v", err)
	}
}

// 0010 drops the charges' foreign key while settlements go on, without a deadlock. A
// settlement updates its reservation, then inserts its charge: it holds reservations
// while it waits for ledger_entries. ALTER TABLE alone would take ledger_entries first
// and then wait for reservations, so the two would wait for each other until
// PostgreSQL's deadlock check, or the settlement's lock timeout, failed one of them.
func TestArchiveMigrationLocksInTheLedgersOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The lock a settlement's UPDATE of its reservation takes.
	pool, settling := txAt(t, 9, 4, "SET LOCAL lock_timeout = '5s'; LOCK TABLE reservations IN ROW EXCLUSIVE MODE")
	migrated := make(chan error, 1)
	go func() { migrated <- tables.Migrate(ctx, pool) }()
	// Once the migration waits for a lock (the settlement's), the settlement goes on.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the migration never waited for the settlement's lock")
		}
	}
	// The lock its INSERT of the charge takes.
	if _, err := settling.Exec(ctx, "LOCK TABLE ledger_entries IN ROW EXCLUSIVE MODE"); err != nil {
		t.Fatalf("a settlement's charge during migration 0010: %v", err)
	}
	if err := settling.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("Migrate beside a settlement: %v", err)
	}
	if v, err := tables.SchemaVersion(ctx, pool); err != nil || v != countMigrations(t) {
		t.Errorf("schema version %d, %v; want %d", v, err, countMigrations(t))
	}
}
