package failover_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// holdMicros is what every reserve of the load holds; its commit charges less.
const holdMicros = 1_000

// account is an account of the load and its key.
type account struct {
	id, keyID string
	topUp     int64
}

// pair is one reserve and its commit, as the client saw them answered.
type pair struct {
	acct           int
	requestID      string
	reservationID  string
	actual         int64 // what the commit reported
	charged        int64 // what the commit's answer charged
	reserveRetries int   // attempts of the reserve that failed before one answered
	commitRetries  int
	replayed       bool // the commit's answer was a replay: an earlier attempt had landed
}

// load is workers doing reserve+commit pairs on accounts through every process of a
// cluster, each retrying unavailable calls with the same ids.
type load struct {
	c     *cluster
	accts []account
	stop  chan struct{}
	wg    sync.WaitGroup
	done  atomic.Int64 // pairs answered

	mu    sync.Mutex
	pairs []pair
	errs  []error
}

func startLoad(c *cluster, accts []account, workers int, prefix string) *load {
	l := &load{c: c, accts: accts, stop: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				p, err := l.pair(w, (w+n)%len(accts), fmt.Sprintf("%s-w%d-%d", prefix, w, n))
				l.mu.Lock()
				if err != nil {
					l.errs = append(l.errs, err)
				} else {
					l.pairs = append(l.pairs, p)
				}
				l.mu.Unlock()
				if err != nil {
					return
				}
				l.done.Add(1)
			}
		}()
	}
	return l
}

// pair reserves and commits once on account a, retrying each call until it is answered.
func (l *load) pair(w, a int, requestID string) (pair, error) {
	ctx := context.Background()
	n := len(l.c.procs)
	p := pair{acct: a, requestID: requestID, actual: 1 + rand.Int64N(holdMicros-1)}
	var err error
	p.reserveRetries, err = retry(ctx, n, w, func(ctx context.Context, i int) error {
		r, err := l.c.led[i].Reserve(ctx, &accountingv1.ReserveRequest{RequestId: requestID, KeyId: l.accts[a].keyID,
			Model: "failover", AmountMicros: holdMicros, Pool: accountingv1.Pool_POOL_GENERAL})
		if err == nil {
			p.reservationID = r.GetReservationId()
		}
		return err
	})
	if err != nil {
		return p, fmt.Errorf("reserve %s after %d failed attempts: %w", requestID, p.reserveRetries, err)
	}
	p.commitRetries, err = retry(ctx, n, w, func(ctx context.Context, i int) error {
		r, err := l.c.led[i].Commit(ctx, &accountingv1.CommitRequest{ReservationId: p.reservationID, ActualMicros: p.actual})
		if err == nil {
			p.charged, p.replayed = r.GetChargedMicros(), r.GetReplayed()
		}
		return err
	})
	if err != nil {
		return p, fmt.Errorf("commit %s (%s) after %d failed attempts: %w", p.reservationID, requestID, p.commitRetries, err)
	}
	if p.charged != p.actual || (p.replayed && p.commitRetries == 0) {
		return p, fmt.Errorf("commit %s (%s): charged %d replayed %v after %d failed attempts, want %d, a replay only after a failed attempt",
			p.reservationID, requestID, p.charged, p.replayed, p.commitRetries, p.actual)
	}
	return p, nil
}

// finish stops the workers once their pair is answered and returns every answered pair.
func (l *load) finish(t testing.TB) []pair {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	for _, err := range l.errs {
		t.Error(err)
	}
	return l.pairs
}

// retryStats counts the pairs whose calls failed over: retried reserves, retried
// commits answered as fresh (the first attempt never landed) and as replays (it
// landed, its answer was lost).
func retryStats(pairs []pair) (reserves, freshCommits, replayedCommits int) {
	for _, p := range pairs {
		if p.reserveRetries > 0 {
			reserves++
		}
		switch {
		case p.commitRetries > 0 && p.replayed:
			replayedCommits++
		case p.commitRetries > 0:
			freshCommits++
		}
	}
	return
}

// expectedBalances is each account's top-up minus the charges answered on it.
func expectedBalances(accts []account, pairs []pair) []int64 {
	want := make([]int64, len(accts))
	for i, a := range accts {
		want[i] = a.topUp
	}
	for _, p := range pairs {
		want[p.acct] -= p.charged
	}
	return want
}

// checkAccounts asks every running process for every account: its balance is its
// top-up minus the answered charges, each once, and nothing is held.
func checkAccounts(t testing.TB, c *cluster, accts []account, pairs []pair) {
	t.Helper()
	want := expectedBalances(accts, pairs)
	for i := range c.procs {
		for a, acct := range accts {
			var got *accountingv1.Account
			_, err := retry(context.Background(), len(c.procs), i, func(ctx context.Context, i int) error {
				r, err := c.adm[i].GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: acct.id})
				got = r.GetAccount()
				return err
			})
			if err != nil {
				t.Fatalf("get account %s: %v", acct.id, err)
			}
			if got.GetBalanceMicros() != want[a] || got.GetReservedMicros() != 0 || got.GetInFlight() != 0 {
				t.Errorf("account %d through %v: balance %d reserved %d in flight %d; want balance %d (top-up %d − answered charges), nothing held",
					a, c.procs[i], got.GetBalanceMicros(), got.GetReservedMicros(), got.GetInFlight(), want[a], acct.topUp)
			}
		}
	}
}

// checkRetries retries every pair whose calls failed over and a sample of the others,
// through varying processes: the reserve answers the reservation it made, the commit
// is a replay of its first charge.
func checkRetries(t testing.TB, c *cluster, accts []account, pairs []pair, sample int) {
	t.Helper()
	var check []pair
	for i, p := range pairs {
		if p.reserveRetries > 0 || p.commitRetries > 0 || i%max(1, len(pairs)/sample) == 0 {
			check = append(check, p)
		}
	}
	var wg sync.WaitGroup
	var bad atomic.Int64
	sem := make(chan struct{}, 64)
	for i, p := range check {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var res *accountingv1.ReserveResponse
			var com *accountingv1.CommitResponse
			_, err := retry(context.Background(), len(c.procs), i, func(ctx context.Context, j int) error {
				var err error
				res, err = c.led[j].Reserve(ctx, &accountingv1.ReserveRequest{RequestId: p.requestID, KeyId: accts[p.acct].keyID,
					Model: "failover", AmountMicros: holdMicros, Pool: accountingv1.Pool_POOL_GENERAL})
				return err
			})
			if err == nil {
				_, err = retry(context.Background(), len(c.procs), i+1, func(ctx context.Context, j int) error {
					var err error
					com, err = c.led[j].Commit(ctx, &accountingv1.CommitRequest{ReservationId: p.reservationID, ActualMicros: p.actual + 1})
					return err
				})
			}
			switch {
			case err != nil:
				t.Errorf("retry of %s: %v", p.requestID, err)
			case res.GetReservationId() != p.reservationID:
				t.Errorf("retried reserve %s: reservation %s, first answered %s", p.requestID, res.GetReservationId(), p.reservationID)
			case !com.GetReplayed() || com.GetChargedMicros() != p.charged:
				t.Errorf("retried commit %s: replayed %v charged %d, want a replay of %d", p.reservationID, com.GetReplayed(), com.GetChargedMicros(), p.charged)
			default:
				return
			}
			bad.Add(1)
		}()
	}
	wg.Wait()
	t.Logf("retried %d pairs again (every one that failed over, and a sample): %d wrong", len(check), bad.Load())
}

// waitFor polls cond every 10 ms until it holds or d passed.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
