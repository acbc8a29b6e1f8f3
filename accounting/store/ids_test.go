package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
)

// checkV7 fails unless id is a version 7 UUID of the RFC's variant whose time is within
// [from, to] (to the millisecond).
func checkV7(t *testing.T, what, id string, from, to time.Time) {
	t.Helper()
	u, err := uuid.Parse(id)
	if err != nil {
		t.Fatalf("%s %q: %v", what, id, err)
	}
	if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		t.Errorf("%s %s: version %d, variant %v; want 7, RFC 4122", what, id, u.Version(), u.Variant())
		return
	}
	sec, nsec := u.Time().UnixTime()
	at := time.Unix(sec, nsec)
	if at.Before(from.Truncate(time.Millisecond)) || at.After(to) {
		t.Errorf("%s %s: its time %s is not within %s..%s", what, id, at.Format(time.RFC3339Nano),
			from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
}

// A reservation's id carries its creation time, on both paths: an operation run alone
// (ledger_reserve takes the column's default, ledger_new_id) and a group-commit batch
// (ids made in Go). Ids made a millisecond or more apart sort in time order, so new
// ones go to the right edge of the primary key (migrations/0006).
func TestReservationIDsAreTimeOrdered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reserve := func(t *testing.T, f *fixture, keyID, requestID string) string {
		r, err := f.s.Reserve(ctx, ledger.ReserveRequest{RequestID: requestID, KeyID: keyID, Model: "demo-chat",
			Amount: 1_000, Pool: ledger.PoolGeneral})
		if err != nil || r.State != ledger.StateHeld {
			t.Errorf("Reserve %s: %+v, %v", requestID, r, err)
		}
		return r.ID
	}

	t.Run("alone", func(t *testing.T) {
		f := newFixtureWith(t, 2, store.Options{NoGroupCommit: true})
		a := f.account(t, "default", 1_000_000)
		k, _ := f.key(t, a.ID, nil)
		var ids []string
		for range 5 {
			from := time.Now()
			id := reserve(t, f, k.ID, reqID())
			checkV7(t, "reservation id", id, from, time.Now())
			ids = append(ids, id)
			time.Sleep(2 * time.Millisecond)
		}
		if !slices.IsSorted(ids) {
			t.Errorf("ids made 2 ms apart are not in order: %v", ids)
		}
	})

	t.Run("batch", func(t *testing.T) {
		f := newFixture(t, 4)
		f.tier(t, bulkTier)
		a := f.account(t, bulkTier.Name, 1_000_000)
		k, _ := f.key(t, a.ID, nil)
		ids := make([]string, 4)
		var calls []func()
		for i := range ids {
			calls = append(calls, func() { ids[i] = reserve(t, f, k.ID, reqID()) })
		}
		from := time.Now()
		batchOf(t, f.s, calls...)
		for _, id := range ids {
			checkV7(t, "reservation id", id, from, time.Now())
		}
	})

	// The function itself, many times in one statement: every value version 7, distinct.
	pool := storetest.NewPool(t, storetest.NewDB(t), 1)
	from := time.Now()
	var got []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(ledger_new_id()::text) FROM generate_series(1, 2000)`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	to := time.Now()
	seen := map[string]bool{}
	for _, id := range got {
		checkV7(t, "ledger_new_id()", id, from, to)
		if seen[id] {
			t.Fatalf("ledger_new_id() repeated %s", id)
		}
		seen[id] = true
	}
}
