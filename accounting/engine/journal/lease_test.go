package journal_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine/journal"
)

// epochs returns the epoch of every record of shard, by seq.
func epochs(t *testing.T, pool *pgxpool.Pool, shard int32) map[int64]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT seq, epoch FROM ledger_journal WHERE shard = $1`, shard)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[int64]int64{}
	for rows.Next() {
		var seq, epoch int64
		if err := rows.Scan(&seq, &epoch); err != nil {
			t.Fatal(err)
		}
		m[seq] = epoch
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// Who may take the lease, and what epoch they get.
func TestAcquire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := journal.New(newPool(t, 2), 1)

	if l, err := j.Current(ctx); err != nil || l != (journal.Lease{}) {
		t.Fatalf("Current of a shard never owned: %+v, %v", l, err)
	}
	steps := []struct {
		name, owner string
		ttl         time.Duration
		sleep       time.Duration // before the step
		wantEpoch   int64         // 0: ErrHeld
	}{
		{"first owner", "a", time.Minute, 0, 1},
		{"the owner again, live", "a", 50 * time.Millisecond, 0, 1},
		{"another owner, live", "b", time.Minute, 0, 0},
		{"another owner, expired", "b", time.Minute, 80 * time.Millisecond, 2},
		{"the old owner, live", "a", time.Minute, 0, 0},
		{"the owner again, expired", "b", 20 * time.Millisecond, 0, 2},
		{"the owner after its expiry", "b", time.Minute, 50 * time.Millisecond, 3},
	}
	for _, s := range steps {
		time.Sleep(s.sleep)
		l, err := j.Acquire(ctx, s.owner, s.owner+":7000", s.ttl)
		if s.wantEpoch == 0 {
			var held *journal.HeldError
			if !errors.As(err, &held) || !errors.Is(err, journal.ErrHeld) || held.Lease.Owner == s.owner {
				t.Errorf("%s: %+v, %v; want ErrHeld with the other owner's lease", s.name, l, err)
			}
			continue
		}
		if err != nil || l.Epoch != s.wantEpoch || l.Owner != s.owner || l.Addr != s.owner+":7000" {
			t.Errorf("%s: %+v, %v; want %s's lease of epoch %d", s.name, l, err, s.owner, s.wantEpoch)
			continue
		}
		if cur, err := j.Current(ctx); err != nil || cur != l {
			t.Errorf("%s: Current %+v, %v; want %+v", s.name, cur, err, l)
		}
	}
}

// Renew extends the current epoch's lease and refuses an old epoch.
func TestRenew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := journal.New(newPool(t, 2), 1)
	a, err := j.Acquire(ctx, "a", "a:1", 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	// Expired but nobody took over: the same epoch goes on.
	r, err := j.Renew(ctx, a.Epoch, time.Minute)
	if err != nil || r.Epoch != a.Epoch || !r.Until.After(a.Until.Add(50*time.Second)) {
		t.Fatalf("renewing an expired lease nobody took: %+v, %v (acquired %+v)", r, err, a)
	}
	if _, err := j.Acquire(ctx, "b", "b:1", time.Minute); !errors.Is(err, journal.ErrHeld) {
		t.Fatalf("taking a renewed lease: %v, want ErrHeld", err)
	}
	if _, err := j.Renew(ctx, a.Epoch+1, time.Minute); !errors.Is(err, journal.ErrFenced) {
		t.Errorf("renewing an epoch that is not the shard's: %v, want ErrFenced", err)
	}
}

// Owner A appends; its lease expires and B takes over with a larger epoch; A's next
// append is fenced and writes nothing, and B continues after Last.
func TestFencing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, 4)
	a := journal.New(pool, 1)
	la, err := a.Acquire(ctx, "a", "a:1", 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, la.Epoch, batch(1, 3)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	b := journal.New(pool, 1)
	lb, err := b.Acquire(ctx, "b", "b:1", time.Minute)
	if err != nil || lb.Epoch <= la.Epoch {
		t.Fatalf("B's acquisition: %+v, %v; want an epoch above %d", lb, err, la.Epoch)
	}
	if err := a.Append(ctx, la.Epoch, batch(4, 2)); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("A's append after the takeover: %v, want ErrFenced", err)
	}
	last := lastOf(t, b)
	if last != 3 {
		t.Fatalf("Last after A was fenced = %d, want 3", last)
	}
	if err := b.Append(ctx, lb.Epoch, batch(last+1, 2)); err != nil {
		t.Fatal(err)
	}
	want := map[int64]int64{1: la.Epoch, 2: la.Epoch, 3: la.Epoch, 4: lb.Epoch, 5: lb.Epoch}
	if got := epochs(t, pool, 1); !mapsEqual(got, want) {
		t.Errorf("epochs by seq %v, want %v", got, want)
	}
}

func mapsEqual(a, b map[int64]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// An append in flight when another owner acquires the shard commits before Acquire
// returns, so the new owner's Last includes it.
func TestAcquireWaitsForAppendInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, 4)
	a := journal.New(pool, 1)
	la, err := a.Acquire(ctx, "a", "a:1", 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, la.Epoch, batch(1, 1)); err != nil {
		t.Fatal(err)
	}
	// What Append does, held open: the owner row locked FOR SHARE, a record inserted.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT FROM ledger_owner WHERE shard = 1 AND epoch = $1 FOR SHARE`, la.Epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO ledger_journal VALUES (1, 2, $1, 'in flight')`, la.Epoch); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond) // A's lease expires
	b := journal.New(pool, 1)
	acquired := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, "b", "b:1", time.Minute)
		acquired <- err
	}()
	select {
	case err := <-acquired:
		t.Fatalf("Acquire returned while an append held the owner row: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	if last := lastOf(t, b); last != 2 {
		t.Errorf("B's Last = %d, want 2 (the append in flight)", last)
	}
}

// A appends from several goroutines (one batch at a time, as an owner does) while B
// takes over: the journal is 1..N without a gap or a duplicate, the records after B's
// Last at takeover are B's, A's appends that succeeded are exactly the records up to
// it, and every append A began after B's Acquire returned was fenced.
func TestTakeoverRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, 8)
	opts := journal.Options{PartitionSize: 64}
	a := journal.NewWith(pool, 1, opts)
	la, err := a.Acquire(ctx, "a", "a:1", 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu          sync.Mutex // the owner's appender: one batch at a time
		next        = int64(1)
		written     = map[int64]bool{} // A's records that Append accepted
		taken       time.Time          // when B's Acquire returned
		lateOK      int                // A's appends accepted that began after it
		fenced      int
		otherErrors []error
	)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				mu.Lock()
				if fenced >= 8 || len(otherErrors) > 0 { // A keeps trying a while after the takeover
					mu.Unlock()
					return
				}
				began := time.Now()
				n := 1 + int(next)%7
				err := a.Append(ctx, la.Epoch, batch(next, n))
				switch {
				case err == nil:
					for s := next; s < next+int64(n); s++ {
						written[s] = true
					}
					next += int64(n)
					if !taken.IsZero() && began.After(taken) {
						lateOK++
					}
				case errors.Is(err, journal.ErrFenced):
					fenced++
				default:
					otherErrors = append(otherErrors, err)
				}
				mu.Unlock()
			}
		})
	}

	b := journal.NewWith(pool, 1, opts)
	var lb journal.Lease
	for {
		lb, err = b.Acquire(ctx, "b", "b:1", time.Minute)
		if err == nil {
			break
		}
		if !errors.Is(err, journal.ErrHeld) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	taken = time.Now()
	mu.Unlock()
	takeover := lastOf(t, b)
	if err := b.Append(ctx, lb.Epoch, batch(takeover+1, 10)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	if len(otherErrors) > 0 {
		t.Fatalf("A's appends failed otherwise than fenced: %v", otherErrors)
	}
	if lateOK > 0 || fenced == 0 {
		t.Errorf("A: %d appends accepted after the takeover, %d fenced", lateOK, fenced)
	}
	if takeover == 0 || int64(len(written)) != takeover {
		t.Errorf("A wrote %d records, B's Last at takeover is %d", len(written), takeover)
	}
	got := epochs(t, pool, 1)
	if int64(len(got)) != takeover+10 {
		t.Errorf("%d records, want %d", len(got), takeover+10)
	}
	for seq := int64(1); seq <= takeover+10; seq++ {
		want := la.Epoch
		if seq > takeover {
			want = lb.Epoch
		}
		if e, ok := got[seq]; !ok || e != want || (seq <= takeover) != written[seq] {
			t.Errorf("record %d: epoch %d (present %v), want %d", seq, e, ok, want)
		}
	}
}

// Append holds the owner row from its check of the epoch to its commit: an Append
// stalled after the check (here on its partition's lock) makes Acquire wait for it,
// and the new owner's Last includes it.
func TestAppendHoldsTheOwnerRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, 6)
	opts := journal.Options{PartitionSize: 100}
	a := journal.NewWith(pool, 1, opts)
	la, err := a.Acquire(ctx, "a", "a:1", 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, la.Epoch, batch(1, 1)); err != nil {
		t.Fatal(err)
	}
	blocker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(ctx) }()
	if _, err := blocker.Exec(ctx, `LOCK TABLE ledger_journal_1_0_100 IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond) // A's lease expires
	appended := make(chan error, 1)
	go func() { appended <- a.Append(ctx, la.Epoch, batch(2, 1)) }()
	// The append has taken the owner row and waits for the partition.
	for t0 := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE NOT granted AND relation = 'ledger_journal_1_0_100'::regclass`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Since(t0) > 10*time.Second {
			t.Fatal("the append never waited for the partition")
		}
	}
	acquired := make(chan error, 1)
	go func() {
		_, err := journal.New(pool, 1).Acquire(ctx, "b", "b:1", time.Minute)
		acquired <- err
	}()
	select {
	case err := <-acquired:
		t.Fatalf("Acquire returned while an append was in flight: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-appended; err != nil {
		t.Fatalf("the append in flight: %v", err)
	}
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	if last := lastOf(t, a); last != 2 {
		t.Errorf("Last after the takeover = %d, want 2", last)
	}
}

// TestClaimTakesTheLeaseOfItsOwnAddress: a process restarted on the address a live
// lease names takes it at once with a new epoch; another address cannot.
func TestClaimTakesTheLeaseOfItsOwnAddress(t *testing.T) {
	ctx := context.Background()
	j := journal.New(newPool(t, 4), 0)
	old, err := j.Acquire(ctx, "old", "10.0.0.1:50052", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Claim(ctx, "other", "10.0.0.2:50052", time.Minute); !errors.Is(err, journal.ErrHeld) {
		t.Fatalf("claim from another address: %v, want ErrHeld", err)
	}
	l, err := j.Claim(ctx, "new", "10.0.0.1:50052", time.Minute)
	if err != nil || l.Epoch <= old.Epoch || l.Owner != "new" {
		t.Fatalf("claim of its own address: %+v, %v; want a new epoch above %d", l, err, old.Epoch)
	}
	if err := j.Append(ctx, old.Epoch, []journal.Record{{Seq: 1, Body: []byte("x")}}); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("the old owner's append after the claim: %v, want ErrFenced", err)
	}
}
