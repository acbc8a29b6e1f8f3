package store_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
)

// forEachBatchPath runs test as a parallel subtest for each way the writer decides a
// batch of several operations: every such batch decided in Go and written set-based, and
// every one run as its operations' lone functions in one transaction (the writer picks
// by the batch's size, Options.LoneBatch).
func forEachBatchPath(t *testing.T, test func(t *testing.T, opts store.Options)) {
	for _, p := range []struct {
		name string
		lone int
	}{{"set-based", 1}, {"lone functions", store.DefaultMaxBatch}} {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			test(t, store.Options{LoneBatch: p.lone})
		})
	}
}

// batchOf submits each call in order from its own goroutine while the writer is held,
// so that all of them are decided in one group-commit transaction, and waits for them.
func batchOf(t *testing.T, s *store.Store, calls ...func()) {
	t.Helper()
	startBatch(t, s, calls...).Wait()
}

// startBatch submits each call in order from its own goroutine while the writer is
// held, then lets the writer decide them together; it does not wait for them.
func startBatch(t *testing.T, s *store.Store, calls ...func()) *sync.WaitGroup {
	t.Helper()
	queued, release := store.HoldGroupCommit(s)
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(call)
		for queued() < i+1 { // keep the queue in the order of calls
			runtime.Gosched()
		}
	}
	release()
	return &wg
}

// One batch mixes admissions, refusals and replays: each operation is decided as if
// alone, in queue order, and a refusal changes nothing and fails nothing else.
func TestGroupCommitRefusalFailsNoOther(t *testing.T) {
	t.Parallel()
	forEachBatchPath(t, func(t *testing.T, opts store.Options) { testRefusalFailsNoOther(t, newFixtureWith(t, 4, opts)) })
}

func testRefusalFailsNoOther(t *testing.T, f *fixture) {
	ctx := context.Background()
	f.tier(t, bulkTier)
	a := f.account(t, bulkTier.Name, 5_000)
	k, _ := f.key(t, a.ID, nil)
	req := func(id string, amount ledger.Micros) ledger.ReserveRequest {
		return ledger.ReserveRequest{RequestID: id, KeyID: k.ID, Model: "m", Amount: amount, Pool: ledger.PoolGeneral}
	}
	amounts := []ledger.Micros{2_000, 10_000, 2_000, 2_000, 2_000}
	ids := []string{"a", "b", "c", "d", "a"} // the last retries the first
	res := make([]ledger.Reservation, len(amounts))
	errs := make([]error, len(amounts))
	var calls []func()
	for i := range amounts {
		calls = append(calls, func() { res[i], errs[i] = f.s.Reserve(ctx, req(ids[i], amounts[i])) })
	}
	batchOf(t, f.s, calls...)
	for i, want := range []ledger.Reason{0, ledger.ReasonInsufficientCredits, 0, ledger.ReasonInsufficientCredits, 0} {
		if want == 0 {
			if errs[i] != nil {
				t.Fatalf("reserve %d: %v", i, errs[i])
			}
			continue
		}
		wantReason(t, errs[i], want)
	}
	if res[4].ID != res[0].ID || res[0].ID == res[2].ID {
		t.Errorf("retried request id got reservation %q, first %q (other %q)", res[4].ID, res[0].ID, res[2].ID)
	}
	if got := f.getAccount(t, a.ID); got.Reserved != 4_000 || got.InFlight != 2 {
		t.Errorf("account after the batch = %+v, want 4000 reserved in 2 holds", got)
	}

	// Settle in one batch: a commit, its retry, and a release; then retry across batches.
	commits := make([]ledger.CommitResult, 2)
	var cerrs [2]error
	var rel ledger.ReleaseResult
	var relErr error
	commit := ledger.CommitRequest{ReservationID: res[0].ID, Actual: 1_500}
	batchOf(t, f.s,
		func() { commits[0], cerrs[0] = f.s.Commit(ctx, commit) },
		func() { commits[1], cerrs[1] = f.s.Commit(ctx, commit) },
		func() { rel, relErr = f.s.Release(ctx, res[2].ID, "cancelled") })
	if err := errors.Join(cerrs[0], cerrs[1], relErr); err != nil {
		t.Fatal(err)
	}
	if commits[0] != (ledger.CommitResult{Charged: 1_500}) || commits[1] != (ledger.CommitResult{Charged: 1_500, Replayed: true}) {
		t.Errorf("commit and its retry in one batch = %+v, %+v", commits[0], commits[1])
	}
	if rel.State != ledger.StateReleased {
		t.Errorf("release = %+v", rel)
	}
	again, err := f.s.Commit(ctx, commit)
	if err != nil || !again.Replayed || again.Charged != 1_500 {
		t.Errorf("commit retried in a later batch = %+v, %v", again, err)
	}
	if r, err := f.s.Reserve(ctx, req("a", 2_000)); err != nil || r.ID != res[0].ID || r.State != ledger.StateCommitted {
		t.Errorf("reserve retried in a later batch = %+v, %v", r, err)
	}
	if got := f.getAccount(t, a.ID); got.Balance != 3_500 || got.Reserved != 0 || got.InFlight != 0 {
		t.Errorf("account after settling = %+v, want balance 3500 and nothing held", got)
	}
	f.checkInvariants(t)
}

// Many callers on one account, with too little credit for all of them, each retrying its
// reserve and its commit: every admitted reservation is charged exactly once, and the
// balance is exactly the top-up minus those charges.
func TestGroupCommitOneAccountExact(t *testing.T) {
	t.Parallel()
	forEachBatchPath(t, func(t *testing.T, opts store.Options) { testOneAccountExact(t, newFixtureWith(t, 8, opts)) })
}

func testOneAccountExact(t *testing.T, f *fixture) {
	ctx := context.Background()
	f.tier(t, bulkTier)
	const topUp = 500_000
	a := f.account(t, bulkTier.Name, topUp)
	k, _ := f.key(t, a.ID, nil)
	var charged, admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range 48 {
		wg.Go(func() {
			for i := range 20 {
				amount := ledger.Micros(1_000 + 37*(g+i))
				r := ledger.ReserveRequest{RequestID: fmt.Sprintf("g%d-%d", g, i), KeyID: k.ID, Model: "m",
					Amount: amount, Pool: ledger.PoolGeneral}
				first, err := f.s.Reserve(ctx, r)
				if err != nil {
					wantReason(t, err, ledger.ReasonInsufficientCredits)
					refused.Add(1)
					continue
				}
				if retry, err := f.s.Reserve(ctx, r); err != nil || retry.ID != first.ID {
					t.Errorf("retried reserve = %+v, %v; want %s", retry, err, first.ID)
				}
				admitted.Add(1)
				c := ledger.CommitRequest{ReservationID: first.ID, Actual: amount - 10}
				for range 2 {
					if _, err := f.s.Commit(ctx, c); err != nil {
						t.Errorf("commit: %v", err)
					}
				}
				charged.Add(amount - 10)
			}
		})
	}
	wg.Wait()
	if admitted.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("admitted %d, refused %d: want both", admitted.Load(), refused.Load())
	}
	// Every operation went through the writer: a reserve per attempt, a retried reserve
	// and two commits per admission.
	st := f.s.GroupStats()
	if ops := 48*20 + 3*admitted.Load(); st.Operations != ops || st.Transactions < 1 || st.Transactions > ops ||
		st.Alone > ops {
		t.Errorf("group stats = %+v, want %d operations in 1 to %[2]d transactions", st, ops)
	}
	got := f.getAccount(t, a.ID)
	if got.Balance != topUp-charged.Load() || got.Reserved != 0 || got.InFlight != 0 {
		t.Errorf("account = %+v, want balance %d and nothing held", got, topUp-charged.Load())
	}
	var entries int64
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries WHERE account_id = $1 AND kind = 'charge'`,
		a.ID).Scan(&entries); err != nil || entries != admitted.Load() {
		t.Errorf("charge entries = %d (%v), want %d", entries, err, admitted.Load())
	}
	f.checkInvariants(t)
}

// A batch that changes nothing (refusals only) still ends its transaction: its
// connection goes back to the pool idle, not destroyed for being left inside a
// transaction (which would also hold the batch's row locks until it closed).
func TestGroupCommitBatchOfRefusalsCommits(t *testing.T) {
	t.Parallel()
	forEachBatchPath(t, func(t *testing.T, opts store.Options) { testBatchOfRefusalsCommits(t, newFixtureWith(t, 4, opts)) })
}

func testBatchOfRefusalsCommits(t *testing.T, f *fixture) {
	ctx := context.Background()
	f.tier(t, bulkTier)
	a := f.account(t, bulkTier.Name, 1_000)
	k, _ := f.key(t, a.ID, nil)
	f.mustReserve(t, k.ID, 10, ledger.PoolGeneral) // the pool's connections are made
	created := f.pool.Stat().NewConnsCount()
	errs := make([]error, 3)
	calls := make([]func(), len(errs))
	for i := range errs {
		calls[i] = func() {
			_, errs[i] = f.s.Reserve(ctx, ledger.ReserveRequest{RequestID: reqID(), KeyID: k.ID, Model: "m",
				Amount: 5_000, Pool: ledger.PoolGeneral})
		}
	}
	batchOf(t, f.s, calls...)
	for _, err := range errs {
		wantReason(t, err, ledger.ReasonInsufficientCredits)
	}
	f.mustReserve(t, k.ID, 10, ledger.PoolGeneral)
	if n := f.pool.Stat().NewConnsCount(); n != created {
		t.Errorf("%d connections made after a batch of refusals: it left its transaction open", n-created)
	}
	f.checkInvariants(t)
}

// A lone operation the writer runs (a batch of one) on an account whose row another
// transaction holds does not stall the writer for the lock timeout: it gives up within
// a short wait and runs alone, so another account's operation is decided meanwhile.
func TestGroupCommitWriterNotStalledByALock(t *testing.T) {
	t.Parallel()
	clk := &clock{t: t0}
	s, pool := storetest.NewStore(t, 8, store.Options{Now: clk.Now, LockTimeout: time.Minute, StatementTimeout: time.Minute})
	f := &fixture{s: s, pool: pool, clk: clk}
	f.tier(t, bulkTier)
	locked, free := f.account(t, bulkTier.Name, 100_000), f.account(t, bulkTier.Name, 100_000)
	kl, _ := f.key(t, locked.ID, nil)
	kf, _ := f.key(t, free.ID, nil)

	tx := lockAccount(t, f, locked.ID)
	blocked := make(chan error, 1)
	go func() { _, err := f.reserve(t, kl.ID, 1_000, ledger.PoolGeneral); blocked <- err }()
	// Wait until the locked account's reserve waits on the row lock, then ask for the other.
	awaitLockWait(t, f)
	done := make(chan error, 1)
	go func() { _, err := f.reserve(t, kf.ID, 1_000, ledger.PoolGeneral); done <- err }()
	awaitPastLock(t, tx, done, blocked, "the writer stalled behind another transaction's row lock")
	f.checkInvariants(t)
}

// A batch with an operation on an account whose row another transaction holds gives up
// within the writer's short wait, whole: its other operations are decided alone
// meanwhile, and the blocked one once the lock goes. Nothing is applied twice.
func TestGroupCommitBatchMeetsALock(t *testing.T) {
	forEachBatchPath(t, func(t *testing.T, opts store.Options) {
		testBatchMeetsALock(t, opts)
	})
}

func testBatchMeetsALock(t *testing.T, opts store.Options) {
	opts.LockTimeout, opts.StatementTimeout = time.Minute, time.Minute
	f := newFixtureWith(t, 8, opts)
	f.tier(t, bulkTier)
	locked, free := f.account(t, bulkTier.Name, 100_000), f.account(t, bulkTier.Name, 100_000)
	kl, _ := f.key(t, locked.ID, nil)
	kf, _ := f.key(t, free.ID, nil)

	tx := lockAccount(t, f, locked.ID)
	done, blocked := f.reserveTwoInOneBatch(t, kf.ID, kl.ID)
	awaitPastLock(t, tx, done, blocked, "the batch waited out another transaction's row lock")
	if st := f.s.GroupStats(); st.Transactions != 1 || st.Operations != 2 || st.Alone != 2 {
		t.Errorf("group stats = %+v, want one transaction of 2 operations, both sent alone", st)
	}
	for _, a := range []string{locked.ID, free.ID} {
		if got := f.getAccount(t, a); got.Reserved != 1_000 || got.InFlight != 1 {
			t.Errorf("account %s = %+v, want one hold of 1000", a, got)
		}
	}
	f.checkInvariants(t)
}

// lockAccount locks account's row in a transaction of its own, rolled back at the end of
// the test if not before.
func lockAccount(t *testing.T, f *fixture, account string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) }) // also when the test fails
	if _, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, account); err != nil {
		t.Fatal(err)
	}
	return tx
}

// awaitLockWait returns once a statement of f's database waits for a lock.
func awaitLockWait(t *testing.T, f *fixture) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for waiting := 0; waiting == 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("no statement waited for the lock")
		}
		if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
}

// reserveTwoInOneBatch queues a reserve of 1,000 on key first, then one on key second,
// and lets the writer decide them together; each one's error comes on its channel.
func (f *fixture) reserveTwoInOneBatch(t *testing.T, first, second string) (firstDone, secondDone <-chan error) {
	t.Helper()
	reserve := func(key string, done chan<- error) func() {
		return func() { _, err := f.reserve(t, key, 1_000, ledger.PoolGeneral); done <- err }
	}
	a, b := make(chan error, 1), make(chan error, 1)
	startBatch(t, f.s, reserve(first, a), reserve(second, b))
	return a, b
}

// awaitPastLock waits for done, the free account's reserve, which must not wait for
// tx's row lock (stalled says what it did if it does), then ends tx and waits for
// blocked, the locked account's reserve.
func awaitPastLock(t *testing.T, tx pgx.Tx, done, blocked <-chan error, stalled string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the free account's reserve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal(stalled)
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != nil {
		t.Fatalf("the locked account's reserve after the lock went: %v", err)
	}
}

// A batch locks its accounts in id order, whatever its queue order (a small one before
// its functions run), and waits for a row another transaction holds, so that two
// replicas' batches over the same accounts wait for each other's transaction, never in
// a cycle, and decide every operation. Here the lower account is locked elsewhere and
// the batch's first operation is on the higher one: while the batch waits for the lower
// account, the higher one is still free; once the lock goes, the batch decides both.
// For a small batch, both with the accounts read by the locking statement (keys this
// store has not seen) and taken from its cache.
func TestGroupCommitBatchLocksAccountsInIDOrder(t *testing.T) {
	forEachBatchPath(t, func(t *testing.T, opts store.Options) {
		for _, cached := range []bool{false, true} {
			t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) {
				testBatchLocksAccountsInIDOrder(t, opts, cached)
			})
		}
	})
}

func testBatchLocksAccountsInIDOrder(t *testing.T, opts store.Options, cached bool) {
	opts.LockTimeout, opts.StatementTimeout = time.Minute, time.Minute
	f := newFixtureWith(t, 8, opts)
	store.SetWriterLockWait(f.s, "1min")
	ctx := context.Background()
	f.tier(t, bulkTier)
	lo, hi := f.account(t, bulkTier.Name, 100_000), f.account(t, bulkTier.Name, 100_000)
	if lo.ID > hi.ID { // uuid text sorts as the uuids do
		lo, hi = hi, lo
	}
	klo, _ := f.key(t, lo.ID, nil)
	khi, _ := f.key(t, hi.ID, nil)
	if cached { // a Reserve of each key teaches the store its account
		for _, k := range []string{klo.ID, khi.ID} {
			if _, err := f.reserve(t, k, 1_000, ledger.PoolGeneral); err != nil {
				t.Fatal(err)
			}
		}
	}

	tx := lockAccount(t, f, lo.ID)
	hiDone, loDone := f.reserveTwoInOneBatch(t, khi.ID, klo.ID)
	awaitLockWait(t, f)
	probe, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := probe.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE NOWAIT`, hi.ID); err != nil {
		t.Errorf("the higher account was locked while the batch waited for the lower one: %v", err)
	}
	if err := probe.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(<-hiDone, <-loDone); err != nil {
		t.Fatal(err)
	}
	st := f.s.GroupStats()
	if st.Alone != 0 {
		t.Errorf("group stats = %+v, want the batch decided whole", st)
	}
	f.checkInvariants(t)
}
