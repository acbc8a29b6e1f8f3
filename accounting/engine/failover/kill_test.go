package failover_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestKillOwnerUnderLoad kills the owner (SIGKILL) three times in a row under load,
// each time at a random moment of its batches, and restarts the killed process as a
// standby: every answered charge is in the balances exactly once, nothing stays held,
// and retries find what the first attempts did.
func TestKillOwnerUnderLoad(t *testing.T) {
	const kills = 3
	workers, accounts := 64, 16
	between := 800 * time.Millisecond // load before each kill, at most
	if testing.Short() {
		between = 400 * time.Millisecond
	}
	c := newCluster(t, 3)
	accts := c.setupAccounts(accounts, 1_000_000_000_000)
	l := startLoad(c, accts, workers, "kill")

	var takeovers []time.Duration
	for k := range kills {
		time.Sleep(between/4 + rand.N(between*3/4))
		owner, row := c.ownerProc()
		before := l.done.Load()
		killed := time.Now()
		if err := owner.signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		took := takeover(t, c, owner, accts[0].id)
		newOwner, newRow := c.ownerProc()
		takeovers = append(takeovers, took)
		t.Logf("kill %d: killed owner %v (epoch %d) after %d pairs; %v answered after %v as owner of epoch %d",
			k+1, owner, row.Epoch, before, newOwner, took, newRow.Epoch)
		if newRow.Epoch <= row.Epoch {
			t.Errorf("epoch after the takeover %d, before %d", newRow.Epoch, row.Epoch)
		}
		owner.wait(t, 5*time.Second)
		if time.Since(killed) < lease/2 {
			t.Errorf("a standby answered %v after the kill, before the lease of %v could lapse", time.Since(killed), lease)
		}
		owner.start(t) // back, as a standby
		if !waitFor(5*time.Second, func() bool { return owner.ready() && newOwner.ready() }) {
			t.Errorf("after kill %d: %v ready %v, the owner %v ready %v", k+1, owner, owner.ready(), newOwner, newOwner.ready())
		}
	}
	time.Sleep(between / 2)
	pairs := l.finish(t)

	reserves, fresh, replayed := retryStats(pairs)
	slices.Sort(takeovers)
	t.Logf("%d pairs by %d workers on %d accounts; after failed attempts: %d reserves answered, %d commits answered fresh, %d as replays",
		len(pairs), workers, accounts, reserves, fresh, replayed)
	t.Logf("takeover times (kill to first answer): %v, median %v (lease %v)", takeovers, takeovers[len(takeovers)/2], lease)
	if len(pairs) < kills*workers {
		t.Errorf("only %d pairs answered", len(pairs))
	}
	if reserves+fresh+replayed == 0 {
		t.Errorf("no call failed over: the kills did not hit the load")
	}
	checkAccounts(t, c, accts, pairs)
	checkRetries(t, c, accts, pairs, 2000)
}

// takeover waits until a process other than dead answers a read, and returns how long
// that took. Every survivor is asked every few milliseconds.
func takeover(t testing.TB, c *cluster, dead *proc, accountID string) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	answered := make(chan time.Duration, len(c.procs))
	var wg sync.WaitGroup
	for i, p := range c.procs {
		if p == dead {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				actx, acancel := context.WithTimeout(ctx, 200*time.Millisecond)
				_, err := c.adm[i].GetAccount(actx, &accountingv1.GetAccountRequest{AccountId: accountID})
				acancel()
				if err == nil {
					answered <- time.Since(start)
					cancel()
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	select {
	case d := <-answered:
		return d
	default:
		t.Fatalf("no process answered within 15 s of the owner's death")
		return 0
	}
}
