package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

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
	want := []ledger.Tier{ // LOCAL-STACK.md's table
		{Name: "default", RPMBeforeTopUp: 20, RPMAfterTopUp: 600, InFlightGeneral: 16, InFlightHighCost: 2},
		{Name: "enterprise", RPMBeforeTopUp: 600, RPMAfterTopUp: 6000, InFlightGeneral: 64, InFlightHighCost: 8},
		{Name: "tight", RPMBeforeTopUp: 3, RPMAfterTopUp: 3, InFlightGeneral: 2, InFlightHighCost: 1},
	}
	if diff := cmp.Diff(want, tiers); diff != "" {
		t.Errorf("seeded tiers (-want +got):\n%s", diff)
	}
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
