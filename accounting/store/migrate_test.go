package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
)

// Several processes starting at once on a missing database: each creates it if
// needed and migrates it; the advisory lock makes them apply each migration once.
func TestEnsureDatabaseAndMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.EmptyDB(t)

	const procs = 4
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for i := range procs {
		wg.Go(func() {
			if err := store.EnsureDatabase(ctx, url); err != nil {
				errs[i] = err
				return
			}
			s, err := store.Open(ctx, url, store.Options{})
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
	if err := store.EnsureDatabase(ctx, url); err != nil {
		t.Fatalf("EnsureDatabase on an existing database: %v", err)
	}

	pool := storetest.NewPool(t, url, 2)
	v, err := store.SchemaVersion(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if want := countMigrations(t); v != want {
		t.Errorf("schema version = %d, want %d", v, want)
	}
	// Migrating again is a no-op.
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}

	tiers, err := store.New(pool, store.Options{}).Tiers(ctx)
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
	url := storetest.EmptyDB(t)
	if err := store.EnsureDatabase(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	return url
}

// poolAt returns a pool of maxConns connections to a new database migrated up to and
// including migration version.
func poolAt(t *testing.T, version int, maxConns int32) *pgxpool.Pool {
	t.Helper()
	pool := storetest.NewPool(t, createdEmptyDB(t), maxConns)
	if err := store.MigrateTo(context.Background(), pool, version); err != nil {
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
	entries, err := store.MigrationFiles()
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func TestLedgerIsAppendOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	a := f.account(t, "default", 1_000_000)
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
	if got := f.getAccount(t, a.ID).Balance; got != 1_000_000 {
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
	pool := storetest.NewPool(t, url, 2)
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
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := storetest.CheckInvariants(ctx, pool); err != nil {
		t.Fatal(err)
	}
	r, err := store.New(pool, store.Options{}).Usage(ctx, ledger.UsageQuery{AccountID: acct, From: t0, To: t0.Add(24 * time.Hour), By: ledger.ByDay})
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
	pool := storetest.NewPool(t, url, 2)
	version := func() int {
		t.Helper()
		v, err := store.SchemaVersion(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := store.MigrateTo(ctx, pool, 2); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != 2 {
		t.Errorf("after MigrateTo 2: version %d", v)
	}
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	all := countMigrations(t)
	if v := version(); v != all {
		t.Errorf("after Migrate: version %d, want %d", v, all)
	}
	if err := store.MigrateTo(ctx, pool, 2); err != nil {
		t.Errorf("MigrateTo an earlier version: %v", err)
	}
	if v := version(); v != all {
		t.Errorf("after MigrateTo an earlier version: version %d, want %d", v, all)
	}
	if err := store.MigrateTo(ctx, pool, all+1); err == nil {
		t.Error("MigrateTo a migration that does not exist: no error")
	}
}

// The update-heavy tables keep free room on their pages for HOT updates, and the hot
// tables are vacuumed more often than the server's default (0004_storage.sql).
func TestStorageSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t, storetest.NewDB(t), 2)
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
	pool := storetest.NewPoolWith(t, url, store.Options{MaxConns: 2, LockTimeout: 20 * time.Millisecond})
	if err := store.MigrateTo(ctx, pool, 2); err != nil {
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
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate while a lock is held for 500 ms: %v", err)
	}
	if v, err := store.SchemaVersion(ctx, pool); err != nil || v != countMigrations(t) {
		t.Errorf("schema version %d, %v; want %d", v, err, countMigrations(t))
	}
}

// Top-ups' idempotency keys are unique per account through a partial index of the
// entries that have one (0007–0009): the constraint that indexed every entry, charges
// included, is gone, a key repeated after the migration adds nothing, and an index an
// interrupted build left invalid is built again.
func TestTopUpIdempotencyIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := poolAt(t, 6, 2)
	s := store.New(pool, store.Options{})
	a, err := s.CreateAccount(ctx, ledger.NewAccount{Tier: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"first", "second"} {
		if _, err := s.TopUp(ctx, a.ID, 1_000, key); err != nil {
			t.Fatal(err)
		}
	}
	// What an interrupted CREATE INDEX CONCURRENTLY leaves: an invalid index of the name
	// (here one that cannot be built: the account has two top-ups).
	if _, err := pool.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY ledger_entries_top_up_idempotency
		ON ledger_entries (account_id) WHERE kind = 'top_up'`); err == nil {
		t.Fatal("the failing index build succeeded")
	}
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}

	checkTopUpIndex(t, pool)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE conname = 'ledger_entries_idempotency'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the old constraint: %d, %v; want gone", n, err)
	}

	for _, tt := range []struct {
		key  string
		want ledger.Micros
	}{{"first", 2_000}, {"second", 2_000}, {"third", 3_000}, {"third", 3_000}, {"", 4_000}, {"", 5_000}} {
		got, err := s.TopUp(ctx, a.ID, 1_000, tt.key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Balance != tt.want {
			t.Errorf("top-up with key %q: balance %d, want %d", tt.key, got.Balance, tt.want)
		}
	}
	if err := storetest.CheckInvariants(ctx, pool); err != nil {
		t.Fatal(err)
	}
}

// checkTopUpIndex fails unless the top-ups' partial unique index (0007) is there as
// written and valid (a concurrent build that failed leaves it invalid).
func checkTopUpIndex(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var def string
	var valid bool
	if err := pool.QueryRow(context.Background(), `SELECT pg_get_indexdef(i.indexrelid), i.indisvalid FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'ledger_entries_top_up_idempotency'`).Scan(&def, &valid); err != nil {
		t.Fatal(err)
	}
	if want := "CREATE UNIQUE INDEX ledger_entries_top_up_idempotency ON public.ledger_entries USING btree (account_id, idempotency_key) WHERE (idempotency_key IS NOT NULL)"; def != want || !valid {
		t.Errorf("index %q (valid %v), want %q, valid", def, valid, want)
	}
}

// The top-up index is built and the constraint replaced (0007–0009) while charges and
// top-ups go on: no call fails, a key repeated during the migration still adds once, the
// index is valid and every invariant holds after.
func TestTopUpIdempotencyMigrationUnderTraffic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := poolAt(t, 6, 8)
	s := store.New(pool, store.Options{})
	if _, err := s.PutTier(ctx, bulkTier); err != nil {
		t.Fatal(err)
	}
	const accounts, workers, keysPerAccount = 4, 6, 5
	type acct struct{ id, key string }
	accts := make([]acct, accounts)
	for i := range accts {
		a, err := s.CreateAccount(ctx, ledger.NewAccount{Tier: bulkTier.Name})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.TopUp(ctx, a.ID, 1_000_000_000, "initial"); err != nil {
			t.Fatal(err)
		}
		k, err := s.CreateKey(ctx, ledger.NewKey{AccountID: a.ID, Hash: []byte(fmt.Sprintf("%032d", i))})
		if err != nil {
			t.Fatal(err)
		}
		accts[i] = acct{a.ID, k.ID}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	var pairs atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				a := accts[(w+n)%accounts]
				// Keys repeat across workers and rounds: each is added once per account.
				if _, err := s.TopUp(ctx, a.id, 1_000, fmt.Sprint("k", n%keysPerAccount)); err != nil {
					errs <- fmt.Errorf("top-up: %w", err)
					return
				}
				r, err := s.Reserve(ctx, ledger.ReserveRequest{RequestID: reqID(), KeyID: a.key, Model: "m",
					Amount: 2_000, Pool: ledger.PoolGeneral})
				var busy *ledger.Refusal
				if errors.As(err, &busy) && busy.Reason == ledger.ReasonConcurrencyLimitExceeded {
					// The bulk tier's pools are never full: the account was busy (its row
					// held by the commits below for longer than the lock wait), nothing
					// was held, and a client tries again.
					continue
				}
				if err == nil {
					// Charged as the accounting of the schema's version does: this version's
					// Commit needs 0012's ledger_commit, and a process charging while the
					// migrations run is one of the previous version (a rolling deploy).
					// Like the store, it tries again when a lock wait timed out (the
					// statement changed nothing).
					for {
						_, err = pool.Exec(ctx, `SELECT ledger_commit($1, 1500, 0, 0, NULL, '', '', NULL)`, r.ID)
						var pgErr *pgconn.PgError
						if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
							break
						}
					}
				}
				if err != nil {
					errs <- fmt.Errorf("reserve and commit: %w", err)
					return
				}
				pairs.Add(1)
			}
		})
	}
	for pairs.Load() < 50 { // traffic under way before the migration starts
		time.Sleep(time.Millisecond)
	}
	// Up to 0010: the migrations that let charges go on while they run. 0012 makes the
	// usage rollup again from the ledger under its locks (charges wait for it: see the
	// migration), and runs once the traffic stopped.
	migErr := store.MigrateTo(ctx, pool, 10)
	at := pairs.Load()
	for pairs.Load() < at+50 { // and after it ends
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	if migErr == nil {
		migErr = store.Migrate(ctx, pool)
	}
	if migErr != nil {
		t.Fatalf("Migrate under traffic: %v", migErr)
	}
	for err := range errs {
		t.Error(err)
	}

	checkTopUpIndex(t, pool)
	for _, a := range accts {
		var n, distinct int
		if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT idempotency_key) FROM ledger_entries
			WHERE account_id = $1 AND kind = 'top_up'`, a.id).Scan(&n, &distinct); err != nil {
			t.Fatal(err)
		}
		if n != distinct || n > keysPerAccount+1 {
			t.Errorf("account %s: %d top-ups of %d distinct keys", a.id, n, distinct)
		}
	}
	if err := storetest.CheckInvariants(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pairs, %d of them after the migration", pairs.Load(), pairs.Load()-at)
}

// 0009 waits for the statements running since before it, not for a session idle in an
// open transaction (it runs no call of the old function; a call it makes later runs the
// new one).
func TestTopUpConstraintDropIgnoresIdleTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := txAt(t, 8, 2, "SELECT count(*) FROM accounts")
	migrateCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := store.Migrate(migrateCtx, pool); err != nil {
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
	go func() { migrated <- store.Migrate(ctx, pool) }()
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
	if v, err := store.SchemaVersion(ctx, pool); err != nil || v != countMigrations(t) {
		t.Errorf("schema version %d, %v; want %d", v, err, countMigrations(t))
	}
}
