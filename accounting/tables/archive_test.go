package tables_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
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

// oldReservation inserts a reservations row as the materializer wrote one before
// migration 0023 (since then nothing adds rows: the archive moves those written
// before): made at created, settled at settled (zero: held), its id carrying created's
// millisecond as ledger_new_id's do.
func oldReservation(t *testing.T, f *fixture, accountID, keyID string, created, settled time.Time) string {
	t.Helper()
	u := uuid.New()
	ms := created.UnixMilli()
	for i := range 6 {
		u[i] = byte(ms >> (8 * (5 - i)))
	}
	u[6] = u[6]&0x0f | 0x70
	state, settledAt, charged := "held", (*time.Time)(nil), int64(0)
	if !settled.IsZero() {
		state, settledAt, charged = "committed", &settled, 600
	}
	_, err := f.pool.Exec(context.Background(), `
		INSERT INTO reservations (id, request_id, account_id, key_id, model, amount, pool, state, actual, charged,
			created_at, expires_at, settled_at)
		VALUES ($1::uuid, $1::text, $2, $3, 'demo-chat', 1000, 1, $4::text, CASE WHEN $4::text = 'held' THEN NULL ELSE $5::bigint END, $5,
			$6, $6::timestamptz + interval '10 minutes', $7)`,
		u.String(), accountID, keyID, state, charged, created, settledAt)
	if err != nil {
		t.Fatal(err)
	}
	return u.String()
}

// A settled reservation written before migration 0023 moves to the archive, whole and
// once, when it was settled longer ago than the given age; held and recently settled
// ones stay; the materializer adds no row meanwhile.
func TestArchiveSettled(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 8)
	f.tier(t, bulkTier)
	a := f.account(t, bulkTier.Name, 1_000_000)
	k, _ := f.key(t, a.ID, nil)
	now := time.Now().UTC().Truncate(time.Millisecond)
	f.clk.Set(now)
	f.caughtUp(t)

	first := oldReservation(t, f, a.ID, k.ID, now, now.Add(time.Second))
	second := oldReservation(t, f, a.ID, k.ID, now.Add(time.Millisecond), now.Add(2*time.Second))
	held := oldReservation(t, f, a.ID, k.ID, now.Add(2*time.Millisecond), time.Time{})
	recent := oldReservation(t, f, a.ID, k.ID, now.Add(10*time.Minute), now.Add(10*time.Minute+time.Second))
	before := map[string]string{}
	for _, id := range []string{first, second} {
		before[id], _ = reservationRow(t, f, "reservations", id)
	}
	// A request decided now writes no row.
	r := f.mustReserve(t, k.ID, 1_000, ledger.PoolGeneral)
	if _, err := f.s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: 600}); err != nil {
		t.Fatal(err)
	}
	f.caughtUp(t)
	if _, ok := reservationRow(t, f, "reservations", r.ID); ok {
		t.Errorf("reservation %s decided by the owner has a row", r.ID)
	}

	_, err := f.s.ArchiveSettled(ctx, tables.MinArchiveAfter-time.Second, 100)
	wantReason(t, err, ledger.ReasonInvalidArgument)

	// At +20 min with a 15 min age, the cutoff is +5 min: the first two move.
	f.clk.Set(now.Add(20 * time.Minute))
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
	for _, id := range []string{held, recent} {
		if _, ok := reservationRow(t, f, "reservations", id); !ok {
			t.Errorf("reservation %s moved too early", id)
		}
	}
	if n, err := f.s.ArchiveSettled(ctx, 15*time.Minute, 100); err != nil || n != 0 {
		t.Fatalf("second ArchiveSettled = %d, %v; want nothing left to move", n, err)
	}
	// Later the recent one goes too; the held one never.
	f.clk.Set(now.Add(36 * time.Minute))
	if n, err := f.s.ArchiveSettled(ctx, 15*time.Minute, 100); err != nil || n != 1 {
		t.Fatalf("ArchiveSettled at +36 min = %d, %v; want 1 moved", n, err)
	}
}

// Archivers running at once (every accounting replica runs one) move each settled
// reservation exactly once, in small batches.
func TestArchiveSettledConcurrent(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 16)
	f.tier(t, bulkTier)
	now := time.Now().UTC().Truncate(time.Millisecond)
	f.clk.Set(now)
	const settled, recent = 200, 20
	a := f.account(t, bulkTier.Name, 1_000_000_000)
	k, _ := f.key(t, a.ID, nil)
	f.caughtUp(t)
	for i := range settled {
		at := now.Add(time.Duration(i) * time.Millisecond)
		oldReservation(t, f, a.ID, k.ID, at, at.Add(time.Second))
	}
	for i := range recent {
		at := now.Add(10*time.Minute + time.Duration(i)*time.Millisecond)
		oldReservation(t, f, a.ID, k.ID, at, at.Add(time.Second))
	}

	f.clk.Set(now.Add(16 * time.Minute))
	var wg sync.WaitGroup
	var mu sync.Mutex
	moved := 0
	start := make(chan struct{})
	close(start)
	sweepers(t, &wg, 3, start, &mu, &moved, func() (int, error) { return f.s.ArchiveSettled(ctx, 15*time.Minute, 7) })
	wg.Wait()
	if moved != settled {
		t.Errorf("moved %d reservations, want %d", moved, settled)
	}
	var left, archived int
	if err := f.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM reservations), (SELECT count(*) FROM reservations_archive)`).Scan(&left, &archived); err != nil {
		t.Fatal(err)
	}
	if left != recent || archived != settled {
		t.Errorf("reservations %d, archive %d; want the %d recent ones and %d", left, archived, recent, settled)
	}
}
