package ledgerclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
	"github.com/llmgw/gateway/extproc/ledgerclient"
)

// An Apply carrying a Reserve for an account whose row another transaction holds and a
// Reserve for another account answers both before the earlier caller's deadline: the
// locked account's with the concurrency refusal, the other's with its hold. Accounting
// on PostgreSQL, whose lock waits here outlast that deadline, so that only the Apply's
// own deadline can end the wait in time.
func TestApplyAnsweredBeforeItsEarliestDeadline(t *testing.T) {
	st, pool := storetest.NewStore(t, 8, store.Options{LockTimeout: time.Minute, StatementTimeout: time.Minute})
	g := startGatedOn(t, st, 1_000, ledgerclient.Options{MaxInFlight: 1, StaleAfter: never})
	accounts, keys := accountsWithKeys(t, g.admin, "", 2, 1_000)
	ctx := context.Background()
	locked, free := keys[0], keys[1]

	first := make(chan error, 1)
	go func() { _, err := g.reserve(ctx, "first", 100); first <- err }()
	<-g.held
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, accounts[0]); err != nil {
		t.Fatal(err)
	}

	reserve := func(key, id string, within time.Duration, done chan<- error) {
		ctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		_, err := g.led.Reserve(ctx, ledger.ReserveRequest{RequestID: id, KeyID: key, Amount: 100, Pool: ledger.PoolGeneral})
		done <- err
	}
	lockedDone, freeDone := make(chan error, 1), make(chan error, 1)
	start := time.Now()
	go reserve(locked, "locked", 20*time.Second, lockedDone)
	g.queued(t, 1)
	go reserve(free, "free", 2*time.Second, freeDone)
	g.queued(t, 2)
	close(g.gate)
	if err := <-freeDone; err != nil {
		t.Errorf("the other account's reserve after %v: %v", time.Since(start), err)
	}
	if err := <-lockedDone; ledger.ReasonOf(err) != ledger.ReasonConcurrencyLimitExceeded {
		t.Errorf("the locked account's reserve after %v: %v, want a concurrency refusal", time.Since(start), err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	g.wantCalls(t, "[Reserve Apply(2)]")
}
