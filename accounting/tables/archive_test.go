package tables_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables"
)

// reservationRow reads a reservation's every column, as text, from table (or reports
// that it is not there).
func reservationRow(t *testing.T, f *fixture, table, id string) (string, bool) {
	t.Helper()
	var row string
	err := f.pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT (id, request_id, account_id, key_id, model,
		amount, pool, state, actual, charged, created_at, expires_at, settled_at, release_reason)::text
		FROM %s WHERE id = $1`, table), id).Scan(&row)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return row, true
}

// A settled reservation moves to the archive, whole and once, when it was settled longer
// ago than the given age; held and recently settled ones stay; a settlement replayed
// after the move changes nothing; the ledger's invariants hold over both tables.
func TestArchiveSettled(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 8)
	f.tier(t, bulkTier)
	a := f.account(t, bulkTier.Name, 1_000_000)
	k, _ := f.key(t, a.ID, nil)
	// Reservation ids carry the time they were made (the real clock), so the store's
	// clock starts at it.
	now := time.Now().UTC().Truncate(time.Millisecond)
	f.clk.Set(now)

	committed := f.mustReserve(t, k.ID, 1_000, ledger.PoolGeneral)
	if _, err := f.s.Commit(ctx, ledger.CommitRequest{ReservationID: committed.ID, Actual: 600}); err != nil {
		t.Fatal(err)
	}
	released := f.mustReserve(t, k.ID, 1_000, ledger.PoolGeneral)
	if _, err := f.s.Release(ctx, released.ID, "upstream_error"); err != nil {
		t.Fatal(err)
	}
	held := f.mustReserve(t, k.ID, 1_000, ledger.PoolGeneral)
	f.clk.Set(now.Add(10 * time.Minute))
	recent := f.mustReserve(t, k.ID, 1_000, ledger.PoolGeneral)
	if _, err := f.s.Commit(ctx, ledger.CommitRequest{ReservationID: recent.ID, Actual: 900}); err != nil {
		t.Fatal(err)
	}
	f.caughtUp(t)
	before := map[string]string{}
	for _, id := range []string{committed.ID, released.ID} {
		before[id], _ = reservationRow(t, f, "reservations", id)
	}

	_, err := f.s.ArchiveSettled(ctx, tables.MinArchiveAfter-time.Second, 100)
	wantReason(t, err, ledger.ReasonInvalidArgument)

	// At +20 min with a 15 min age, the cutoff is +5 min: the first two move (once the
	// tables hold their settlements).
	f.clk.Set(now.Add(20 * time.Minute))
	f.caughtUp(t)
	n, err := f.s.ArchiveSettled(ctx, 15*time.Minute, 100)
	if err != nil || n != 2 {
		t.Fatalf("ArchiveSettled = %d, %v; want 2 moved", n, err)
	}
	for id, want := range before {
		if _, ok := reservationRow(t, f, "reservations", id); ok {
			t.Errorf("reservation %s still in reservations", id)
		}
		if got, ok := reservationRow(t, f, "reservations_archive", id); !ok || got != want {
			t.Errorf("archived %s = %q (found %v), want %q", id, got, ok, want)
		}
	}
	for _, id := range []string{held.ID, recent.ID} {
		if _, ok := reservationRow(t, f, "reservations", id); !ok {
			t.Errorf("reservation %s moved too early", id)
		}
	}
	if n, err := f.s.ArchiveSettled(ctx, 15*time.Minute, 100); err != nil || n != 0 {
		t.Fatalf("second ArchiveSettled = %d, %v; want nothing left to move", n, err)
	}
	f.checkInvariants(t)

	// A replayed settlement of an archived reservation is answered from the owner's
	// memory, as the first, and changes nothing.
	if c, err := f.s.Commit(ctx, ledger.CommitRequest{ReservationID: committed.ID, Actual: 600}); err != nil || !c.Replayed {
		t.Errorf("Commit of an archived reservation: %+v, %v; want the first answer replayed", c, err)
	}
	if got := f.getAccount(t, a.ID); got.Balance != 1_000_000-600-900 || got.Reserved != 1_000 || got.InFlight != 1 {
		t.Errorf("account = %+v, want balance %d and one hold of 1000", got, 1_000_000-600-900)
	}

	// Later the rest goes too, once settled long enough.
	if _, err := f.s.Commit(ctx, ledger.CommitRequest{ReservationID: held.ID, Actual: 100}); err != nil {
		t.Fatal(err)
	}
	f.clk.Set(now.Add(36 * time.Minute))
	f.caughtUp(t)
	if n, err := f.s.ArchiveSettled(ctx, 15*time.Minute, 100); err != nil || n != 2 {
		t.Fatalf("ArchiveSettled at +36 min = %d, %v; want 2 moved", n, err)
	}
	f.checkInvariants(t)
}

// Archivers running at once (every accounting replica runs one) move each settled
// reservation exactly once, in small batches, while the ledger goes on.
func TestArchiveSettledConcurrent(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 16)
	f.tier(t, bulkTier)
	now := time.Now().UTC().Truncate(time.Millisecond)
	f.clk.Set(now)
	const accounts, pairs = 4, 200
	keys := make([]string, accounts)
	for i := range keys {
		a := f.account(t, bulkTier.Name, 1_000_000_000)
		k, _ := f.key(t, a.ID, nil)
		keys[i] = k.ID
	}
	// Many callers at once: the owner decides them in batches.
	var wg sync.WaitGroup
	for i := range pairs {
		wg.Go(func() {
			r, err := f.reserve(t, keys[i%accounts], 1_000, ledger.PoolGeneral)
			if err != nil {
				t.Errorf("Reserve: %v", err)
				return
			}
			if i%5 == 0 {
				_, err = f.s.Release(ctx, r.ID, "upstream_error")
			} else {
				_, err = f.s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: 700})
			}
			if err != nil {
				t.Errorf("settle: %v", err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	f.clk.Set(now.Add(16 * time.Minute))
	f.caughtUp(t)
	var mu sync.Mutex
	moved := 0
	start := make(chan struct{})
	close(start)
	sweepers(t, &wg, 3, start, &mu, &moved, func() (int, error) { return f.s.ArchiveSettled(ctx, 15*time.Minute, 7) })
	// Meanwhile the accounts take new requests.
	for i := range 20 {
		wg.Go(func() {
			r, err := f.reserve(t, keys[i%accounts], 1_000, ledger.PoolGeneral)
			if err == nil {
				_, err = f.s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: 500})
			}
			if err != nil {
				t.Errorf("pair during archiving: %v", err)
			}
		})
	}
	wg.Wait()
	f.caughtUp(t)
	if moved != pairs {
		t.Errorf("moved %d reservations, want %d", moved, pairs)
	}
	var left, archived int
	if err := f.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM reservations), (SELECT count(*) FROM reservations_archive)`).Scan(&left, &archived); err != nil {
		t.Fatal(err)
	}
	if left != 20 || archived != pairs {
		t.Errorf("reservations %d, archive %d; want the 20 recent ones and %d", left, archived, pairs)
	}
	f.checkInvariants(t)
}
