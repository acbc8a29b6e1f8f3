package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// admitBudget is the deadline extproc gives its Reserve (lifecycle.AdmitBudget), which
// gRPC carries to the store.
const admitBudget = 1500 * time.Millisecond

// While another transaction holds an account's row for seconds (an operator's
// transaction, a long top-up), a burst of 16 reserves for that account is refused with
// the concurrency refusal, each before its caller's deadline, never failed on it
// (which extproc answers 503); reserves for other accounts meanwhile all succeed, with
// default options and the pool size of a small machine. Nothing is held by the
// refusals.
func TestLockedAccountRefusedWithinDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 8)
	f.tier(t, bulkTier)
	locked := f.account(t, bulkTier.Name, 1_000_000)
	kl, _ := f.key(t, locked.ID, nil)
	var others []string
	for range 4 {
		a := f.account(t, bulkTier.Name, 1_000_000)
		k, _ := f.key(t, a.ID, nil)
		others = append(others, k.ID)
	}
	reserve := func(key string) (ledger.Reservation, time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), admitBudget)
		defer cancel()
		start := time.Now()
		r, err := f.s.Reserve(ctx, ledger.ReserveRequest{RequestID: reqID(), KeyID: key, Model: "demo-chat",
			Amount: 1_000, Pool: ledger.PoolGeneral})
		return r, time.Since(start), err
	}

	tx := lockAccount(t, f, locked.ID)
	lockEnds := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	lockedErrs := make([]error, 16)
	for i := range lockedErrs {
		wg.Go(func() {
			_, took, err := reserve(kl.ID)
			var ref *ledger.Refusal
			switch {
			case !errors.As(err, &ref) || ref.Reason != ledger.ReasonConcurrencyLimitExceeded:
				lockedErrs[i] = fmt.Errorf("after %v: %v, want a concurrency refusal", took, err)
			case ref.RetryAfter != ledger.ConcurrencyRetryAfter:
				lockedErrs[i] = fmt.Errorf("retry after %d, want %d", ref.RetryAfter, ledger.ConcurrencyRetryAfter)
			case took >= admitBudget:
				lockedErrs[i] = fmt.Errorf("refused after %v, past the deadline", took)
			}
		})
	}
	var mu sync.Mutex
	var held []string
	var otherErrs []error
	var n atomic.Int64
	for _, key := range others {
		wg.Go(func() {
			for time.Now().Before(lockEnds.Add(-admitBudget)) {
				r, took, err := reserve(key)
				n.Add(1)
				mu.Lock()
				if err != nil {
					otherErrs = append(otherErrs, fmt.Errorf("after %v: %w", took, err))
				} else {
					held = append(held, r.ID)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if time.Now().After(lockEnds) {
		t.Fatal("the reserves outlasted the lock")
	}
	time.Sleep(time.Until(lockEnds))
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}

	for i, err := range lockedErrs {
		if err != nil {
			t.Errorf("locked account, reserve %d: %v", i, err)
		}
	}
	if err := errors.Join(otherErrs...); err != nil {
		t.Errorf("other accounts: %d of %d reserves failed: %v", len(otherErrs), n.Load(), err)
	}
	if got := f.getAccount(t, locked.ID); got.Reserved != 0 || got.InFlight != 0 {
		t.Errorf("locked account = %+v, want nothing held", got)
	}
	for _, id := range held {
		if _, err := f.s.Release(context.Background(), id, "test"); err != nil {
			t.Fatal(err)
		}
	}
	// The lock gone, the account is served again.
	f.mustReserve(t, kl.ID, 1_000, ledger.PoolGeneral)
	f.checkInvariants(t)
}
