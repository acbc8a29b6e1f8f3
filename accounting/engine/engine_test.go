package engine

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/engine/codec"
	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// running is an engine running on j until the test ends (or stop is called).
type running struct {
	Store
	stop context.CancelFunc
	done chan struct{} // closed when Run returned
}

func start(t *testing.T, j Journal, opts Options) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := New(j, opts)
	r := &running{Store: Store{Engine: e}, stop: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); _ = e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// waitOwning waits until r owns its shard.
func waitOwning(t *testing.T, r *running, within time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !r.Owning() {
		if time.Since(t0) > within {
			t.Fatalf("not the owner after %v", within)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(t0)
}

// waitStopped waits until r stopped owning n times.
func waitStopped(t *testing.T, r *running, n int64) {
	t.Helper()
	for t0 := time.Now(); r.Stops() < n; time.Sleep(2 * time.Millisecond) {
		if time.Since(t0) > 5*time.Second {
			t.Fatalf("the owner stopped %d times, want %d", r.Stops(), n)
		}
	}
}

var bulk = ledger.Tier{Name: "bulk", RPMBeforeTopUp: 1 << 30, RPMAfterTopUp: 1 << 30, InFlightGeneral: 1 << 30, InFlightHighCost: 1 << 30}

// fund makes an account on the bulk tier with balance and one key, and returns the key.
func fund(t *testing.T, s ledger.Store, name string, balance ledger.Micros) (ledger.Account, ledger.Key) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.PutTier(ctx, bulk); err != nil {
		t.Fatal(err)
	}
	a, err := s.CreateAccount(ctx, ledger.NewAccount{Tier: bulk.Name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TopUp(ctx, a.ID, balance, ""); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte(name))
	k, err := s.CreateKey(ctx, ledger.NewKey{AccountID: a.ID, Hash: h[:]})
	if err != nil {
		t.Fatal(err)
	}
	return a, k
}

func TestAnswerWaitsForTheJournal(t *testing.T) {
	j := newMemJournal()
	r := start(t, j, Options{})
	waitOwning(t, r, 5*time.Second)
	_, k := fund(t, r, "k", 1_000_000)

	release := make(chan struct{})
	j.mu.Lock()
	j.appendHook = func(int64, []journal.Record) error { <-release; return nil }
	j.mu.Unlock()
	got := make(chan error, 1)
	go func() {
		_, err := r.Reserve(context.Background(), ledger.ReserveRequest{RequestID: "r1", KeyID: k.ID, Amount: 10, Pool: ledger.PoolGeneral})
		got <- err
	}()
	// A read decided after the reserve waits for it too.
	read := make(chan error, 1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, err := r.GetAccount(context.Background(), k.AccountID)
		read <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Reserve answered (%v) before its journal append finished", err)
	case err := <-read:
		t.Fatalf("GetAccount answered (%v) before the reserve it saw was durable", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
}

func TestAppendFailureStopsTheOwner(t *testing.T) {
	j := newMemJournal()
	r := start(t, j, Options{Lease: 300 * time.Millisecond})
	waitOwning(t, r, 5*time.Second)
	a, k := fund(t, r, "k", 1_000_000)
	before := r.state.Snapshot() // quiet: nothing in flight

	j.mu.Lock()
	j.appendHook = func(int64, []journal.Record) error { return errors.New("disk full") }
	j.mu.Unlock()
	_, err := r.Reserve(context.Background(), ledger.ReserveRequest{RequestID: "r1", KeyID: k.ID, Amount: 10, Pool: ledger.PoolGeneral})
	if !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("Reserve after a failed append: %v, want ErrUnavailable", err)
	}
	waitStopped(t, r, 1)
	if _, err := r.GetAccount(context.Background(), a.ID); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("GetAccount of a stopped owner: %v", err)
	}
	if n := r.AppendErrors(); n != 1 {
		t.Errorf("AppendErrors %d after one failed append, want 1", n)
	}
	j.mu.Lock()
	j.appendHook = nil
	j.mu.Unlock()

	// The process owns again once its old lease lapsed, with the state rebuilt from
	// the journal: the failed batch is not in it.
	waitOwning(t, r, 5*time.Second)
	if n := r.Takeovers(); n != 2 {
		t.Errorf("Takeovers %d after owning, failing and owning again, want 2", n)
	}
	if got := r.state.Snapshot(); !reflect.DeepEqual(got, before) {
		t.Fatalf("state rebuilt from the journal differs from the owner's before the failure:\n%+v\n%+v", got, before)
	}
	got, err := r.GetAccount(context.Background(), a.ID)
	if err != nil || got.Reserved != 0 || got.Balance != 1_000_000 {
		t.Fatalf("account after the failed reserve: %+v, %v", got, err)
	}
}

// TestRetriedAfterACrashGetsTheFirstAnswer: the append lands but the owner dies before
// answering; the client retries at the next owner and gets the first decision.
func TestRetriedAfterACrashGetsTheFirstAnswer(t *testing.T) {
	j := newMemJournal()
	r := start(t, j, Options{Lease: 300 * time.Millisecond})
	waitOwning(t, r, 5*time.Second)
	a, k := fund(t, r, "k", 1_000_000)
	res, err := r.Reserve(context.Background(), ledger.ReserveRequest{RequestID: "r1", KeyID: k.ID, Amount: 500, Pool: ledger.PoolGeneral})
	if err != nil {
		t.Fatal(err)
	}

	// The commit's append lands, then the owner "dies" before answering.
	j.mu.Lock()
	j.appendHook = func(epoch int64, recs []journal.Record) error {
		j.mu.Lock()
		j.appendHook = nil
		j.mu.Unlock()
		if err := j.Append(context.Background(), epoch, recs); err != nil {
			return err
		}
		return errors.New("connection lost after commit")
	}
	j.mu.Unlock()
	commit := ledger.CommitRequest{ReservationID: res.ID, Actual: 300}
	if _, err := r.Commit(context.Background(), commit); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("Commit whose answer was lost: %v", err)
	}
	// The process rebuilds itself from the journal and owns again.
	waitStopped(t, r, 1)
	waitOwning(t, r, 5*time.Second)
	next := r
	cr, err := next.Commit(context.Background(), commit)
	if err != nil || !cr.Replayed || cr.Charged != 300 {
		t.Fatalf("retried commit: %+v, %v; want the first charge, replayed", cr, err)
	}
	again, err := next.Reserve(context.Background(), ledger.ReserveRequest{RequestID: "r1", KeyID: k.ID, Amount: 500, Pool: ledger.PoolGeneral})
	if err != nil || again.ID != res.ID {
		t.Fatalf("retried reserve: %+v, %v; want reservation %s", again, err, res.ID)
	}
	acct, err := next.GetAccount(context.Background(), a.ID)
	if err != nil || acct.Balance != 1_000_000-300 || acct.Reserved != 0 {
		t.Fatalf("account: %+v, %v; charged once, 300", acct, err)
	}
}

func TestStandbyTakesOverAndHoldsTheSameState(t *testing.T) {
	j := newMemJournal()
	opts := Options{Lease: 200 * time.Millisecond, Poll: 5 * time.Millisecond}
	a := start(t, j, opts)
	waitOwning(t, a, 5*time.Second)
	b := start(t, j, opts)
	_, k := fund(t, a, "k", 1_000_000)
	for i := range 50 {
		res, err := a.Reserve(context.Background(), ledger.ReserveRequest{RequestID: fmt.Sprint(i), KeyID: k.ID, Amount: 100, Pool: ledger.PoolGeneral})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := a.Commit(context.Background(), ledger.CommitRequest{ReservationID: res.ID, Actual: 40}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := b.GetAccount(context.Background(), k.AccountID); !errors.As(err, new(*ledger.NotOwnerError)) {
		t.Fatalf("a standby answered: %v", err)
	}
	want := a.state.Snapshot()
	a.stop()
	<-a.done
	took := waitOwning(t, b, 5*time.Second)
	t.Logf("standby owned %v after the owner stopped (lease %v)", took, opts.Lease)
	if got := b.state.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatal("the standby's state differs from the old owner's")
	}
}

// TestPausedOwnerIsFenced: the owner stops renewing (as if paused), a standby takes
// over, and every write of the old owner after that is refused; a hot account under
// many concurrent clients stays exact across the switch.
func TestPausedOwnerIsFenced(t *testing.T) {
	j := newMemJournal()
	opts := Options{Lease: 300 * time.Millisecond, Poll: 5 * time.Millisecond}
	a := start(t, j, opts)
	waitOwning(t, a, 5*time.Second)
	b := start(t, j, opts)
	const balance = 1 << 40
	acct, k := fund(t, a, "hot", balance)

	var owner atomic.Pointer[running]
	owner.Store(a)
	var charged, answered, switched atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(10 * time.Second)
	for c := range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				id := fmt.Sprintf("c%d-%d", c, i)
				for time.Now().Before(deadline) {
					s := owner.Load()
					res, err := s.Reserve(context.Background(), ledger.ReserveRequest{RequestID: id, KeyID: k.ID, Amount: 1000, Pool: ledger.PoolGeneral})
					if err == nil {
						var cr ledger.CommitResult
						for time.Now().Before(deadline) {
							cr, err = owner.Load().Commit(context.Background(), ledger.CommitRequest{ReservationID: res.ID, Actual: int64(100 + c)})
							if err == nil || !errors.Is(err, ledger.ErrUnavailable) {
								break
							}
							time.Sleep(time.Millisecond)
						}
						if err != nil {
							t.Errorf("commit %s: %v", id, err)
							return
						}
						if s != owner.Load() {
							switched.Add(1)
						}
						if !cr.Replayed {
							charged.Add(cr.Charged)
						}
						answered.Add(1)
						break
					}
					if !errors.Is(err, ledger.ErrUnavailable) {
						t.Errorf("reserve %s: %v", id, err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	// Pause the owner once a third of the pairs are answered: its lease lapses, the
	// standby takes over, and the old owner's renewals and appends are refused as a
	// paused process's would be once it wakes.
	for answered.Load() < 1000 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	resume := j.pause()
	go func() {
		waitOwning(t, b, 5*time.Second)
		owner.Store(b)
		resume()
	}()
	waitStopped(t, a, 1)
	wg.Wait()
	if t.Failed() {
		return
	}
	if !errors.Is(a.Err(), errFenced) {
		t.Errorf("old owner stopped with %v, want fenced", a.Err())
	}
	if n := a.AppendErrors(); n != 0 {
		t.Errorf("AppendErrors %d on an owner fenced by a takeover, want 0", n)
	}
	got, err := b.GetAccount(context.Background(), acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Balance != balance-charged.Load() || got.Reserved != 0 {
		t.Fatalf("hot account after the switch: balance %d reserved %d; want %d, 0 (%d commits answered)",
			got.Balance, got.Reserved, balance-charged.Load(), answered.Load())
	}
	t.Logf("%d pairs reserved at the old owner and committed at the new one", switched.Load())
	if answered.Load() != 3000 {
		t.Fatalf("%d of 3000 pairs answered", answered.Load())
	}
	if err := b.state.Check(); err != nil {
		t.Fatal(err)
	}
	if got, want := foldJournal(t, j), b.state.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatal("the journal folded from its first snapshot differs from the new owner's state")
	}
}

// foldJournal is the state of j's first snapshot with every record applied: what any
// process that reads the journal rebuilds.
func foldJournal(t *testing.T, j *memJournal) machine.Snapshot {
	t.Helper()
	j.mu.Lock()
	body := j.snaps[0]
	j.mu.Unlock()
	var sn machine.Snapshot
	if err := json.Unmarshal(body, &sn); err != nil {
		t.Fatal(err)
	}
	st := machine.Restore(sn)
	if len(sn.Tiers) == 0 {
		st = machine.New()
	}
	recs, _ := j.Read(context.Background(), 0, 1<<30)
	for _, r := range recs {
		ev, err := codec.Decode(r.Body)
		if err != nil {
			t.Fatalf("seq %d: %v", r.Seq, err)
		}
		st.Apply(ev)
	}
	if err := st.Check(); err != nil {
		t.Fatal(err)
	}
	return st.Snapshot()
}

// TestSettlementsRideTheNextFlush: a batch of settlements only waits up to
// SettleDelay for company; any other operation flushes it at once, in one append.
func TestSettlementsRideTheNextFlush(t *testing.T) {
	j := newMemJournal()
	r := start(t, j, Options{SettleDelay: 300 * time.Millisecond})
	waitOwning(t, r, 5*time.Second)
	a, k := fund(t, r, "k", 1_000_000)
	ctx := context.Background()
	reserve := func(id string) ledger.Reservation {
		res, err := r.Reserve(ctx, ledger.ReserveRequest{RequestID: id, KeyID: k.ID, Amount: 100, Pool: ledger.PoolGeneral})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	r1, r2 := reserve("r1"), reserve("r2")

	t0 := time.Now()
	if _, err := r.Commit(ctx, ledger.CommitRequest{ReservationID: r1.ID, Actual: 10}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took < 250*time.Millisecond || took > 2*time.Second {
		t.Errorf("a lone commit was answered after %v, want about the settle delay (300ms)", took)
	}

	appends, _, _ := r.Stats()
	done := make(chan error, 1)
	go func() {
		_, err := r.Commit(ctx, ledger.CommitRequest{ReservationID: r2.ID, Actual: 10})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // the commit is decided and waiting
	t0 = time.Now()
	acct, err := r.GetAccount(ctx, a.ID)
	if err != nil || acct.Reserved != 0 {
		t.Fatalf("account: %+v, %v; want both commits seen", acct, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took > 200*time.Millisecond {
		t.Errorf("a read waited %v behind a waiting commit, want it flushed at once", took)
	}
	if now, _, _ := r.Stats(); now != appends+1 {
		t.Errorf("%d appends for the commit and the read, want 1", now-appends)
	}
}

// TestLateOperationIsNotDecided: a reserve whose caller's deadline passed while it
// queued (here behind a lease renewal that hangs, as in a paused process) is answered
// with the deadline and decided not at all: it holds nothing once the owner goes on.
func TestLateOperationIsNotDecided(t *testing.T) {
	j := newMemJournal()
	a := start(t, j, Options{Lease: 200 * time.Millisecond, Poll: 5 * time.Millisecond})
	waitOwning(t, a, 5*time.Second)
	acct, k := fund(t, a, "late", 1_000_000)

	// The renewals hang; once the lease ran out, the decide loop renews before it
	// answers anything more, and hangs there too.
	resume := j.pause()
	time.Sleep(300 * time.Millisecond)
	first := make(chan error, 1)
	go func() {
		_, err := a.Reserve(context.Background(), ledger.ReserveRequest{RequestID: "in-time", KeyID: k.ID, Amount: 1000, Pool: ledger.PoolGeneral})
		first <- err
	}()
	time.Sleep(50 * time.Millisecond) // the loop took it and hangs in the renewal
	var late sync.WaitGroup
	for i := range 5 {
		late.Add(1)
		go func() {
			defer late.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := a.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprintf("late-%d", i), KeyID: k.ID, Amount: 7000, Pool: ledger.PoolGeneral})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("late reserve: %v, want the deadline", err)
			}
		}()
	}
	late.Wait()
	resume()
	if err := <-first; err != nil {
		t.Fatalf("reserve in time: %v", err)
	}
	// A read after them is decided after them: the account is what they left.
	got, err := a.GetAccount(context.Background(), acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Reserved != 1000 {
		t.Fatalf("reserved %d after the late reserves, want 1000 (the one in time only)", got.Reserved)
	}
	if n := a.LateRefused(); n != 5 {
		t.Fatalf("%d operations refused as late, want 5", n)
	}
}
