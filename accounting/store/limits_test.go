package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
)

// reserveFreeAndRelease admits one free request and frees its slot at once, so only the
// requests-per-minute window remembers it.
func (f *fixture) reserveFreeAndRelease(t *testing.T, keyID string) error {
	t.Helper()
	r, err := f.reserve(t, keyID, 0, ledger.PoolGeneral)
	if err != nil {
		return err
	}
	return errOf(f.s.Release(context.Background(), r.ID, ""))
}

func TestRequestsPerMinute(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()

	t.Run("tight tier", func(t *testing.T) {
		a := f.account(t, "tight", 0)
		k, _ := f.key(t, a.ID, nil)
		f.clk.Set(time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC))
		for i := range 3 {
			f.clk.Set(f.clk.Now().Add(10 * time.Second))
			if err := f.reserveFreeAndRelease(t, k.ID); err != nil {
				t.Fatalf("request %d: %v", i+1, err)
			}
		}
		for _, now := range []time.Time{
			time.Date(2026, 3, 14, 12, 0, 30, 0, time.UTC),
			time.Date(2026, 3, 14, 12, 0, 59, 100_000_000, time.UTC),
		} {
			f.clk.Set(now)
			_, err := f.reserve(t, k.ID, 0, ledger.PoolGeneral)
			got := refusal(t, err)
			want := secondsUntil(now, time.Date(2026, 3, 14, 12, 1, 0, 0, time.UTC))
			if got.Reason != ledger.ReasonRateLimitExceeded || got.RetryAfter != want || got.Limit != "rpm" {
				t.Errorf("at %v: refusal %+v, want rate_limit_exceeded with Retry-After %d", now, got, want)
			}
		}
		// The next minute is a new window.
		f.clk.Set(time.Date(2026, 3, 14, 12, 1, 0, 0, time.UTC))
		for i := range 3 {
			if err := f.reserveFreeAndRelease(t, k.ID); err != nil {
				t.Fatalf("next minute, request %d: %v", i+1, err)
			}
		}
		_, err := f.reserve(t, k.ID, 0, ledger.PoolGeneral)
		wantReason(t, err, ledger.ReasonRateLimitExceeded)
	})

	t.Run("after a top-up the higher limit applies", func(t *testing.T) {
		f.tier(t, ledger.Tier{Name: "rpmtest", RPMBeforeTopUp: 2, RPMAfterTopUp: 5, InFlightGeneral: 100, InFlightHighCost: 10})
		a := f.account(t, "rpmtest", 0)
		k, _ := f.key(t, a.ID, nil)
		f.clk.Set(t0)
		for range 2 {
			must(t, f.reserveFreeAndRelease(t, k.ID))
		}
		_, err := f.reserve(t, k.ID, 0, ledger.PoolGeneral)
		wantReason(t, err, ledger.ReasonRateLimitExceeded)
		must(t, errOf(f.s.TopUp(ctx, a.ID, 1_000_000, "")))
		// Same minute: the 2 already admitted count against the new limit of 5.
		for i := range 3 {
			if err := f.reserveFreeAndRelease(t, k.ID); err != nil {
				t.Fatalf("after top-up, request %d: %v", i+3, err)
			}
		}
		_, err = f.reserve(t, k.ID, 0, ledger.PoolGeneral)
		wantReason(t, err, ledger.ReasonRateLimitExceeded)
	})

	t.Run("a clock behind the window does not reset it", func(t *testing.T) {
		a := f.account(t, "tight", 0)
		k, _ := f.key(t, a.ID, nil)
		f.clk.Set(time.Date(2026, 3, 14, 12, 5, 0, 0, time.UTC))
		for range 3 {
			must(t, f.reserveFreeAndRelease(t, k.ID))
		}
		f.clk.Set(time.Date(2026, 3, 14, 12, 4, 59, 0, time.UTC)) // another process, 1 s behind
		_, err := f.reserve(t, k.ID, 0, ledger.PoolGeneral)
		wantReason(t, err, ledger.ReasonRateLimitExceeded)
	})
	f.checkInvariants(t)
}

// outcomes counts concurrent reservation results by refusal reason (0: admitted).
type outcomes struct {
	mu       sync.Mutex
	byReason map[ledger.Reason]int
	admitted []ledger.Reservation
	refusals []*ledger.Refusal
	errs     []error
}

func (o *outcomes) add(r ledger.Reservation, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byReason == nil {
		o.byReason = map[ledger.Reason]int{}
	}
	o.byReason[ledger.ReasonOf(err)]++
	switch ref := (*ledger.Refusal)(nil); {
	case err == nil:
		o.admitted = append(o.admitted, r)
	case ledger.ReasonOf(err) != 0:
		ref, _ = err.(*ledger.Refusal)
		o.refusals = append(o.refusals, ref)
	default:
		o.errs = append(o.errs, err)
	}
}

// hammer runs n Reserve calls at once on stores (round robin) and collects outcomes.
// A watcher polls the account meanwhile and fails t if available credits ever go
// negative or a pool ever goes past its size.
func hammer(t *testing.T, f *fixture, stores []*store.Store, n int, accountID string, req func(i int) ledger.ReserveRequest, tier ledger.Tier) *outcomes {
	t.Helper()
	var (
		o     outcomes
		wg    sync.WaitGroup
		start = make(chan struct{})
		done  atomic.Bool
	)
	watcher := make(chan struct{})
	go func() {
		defer close(watcher)
		for !done.Load() {
			a, err := f.s.GetAccount(context.Background(), accountID)
			if err != nil {
				t.Errorf("GetAccount: %v", err)
				return
			}
			if a.Available() < 0 || a.InFlight > tier.InFlightGeneral || a.InFlightHighCost > tier.InFlightHighCost {
				t.Errorf("limits crossed mid-flight: %+v", a)
				return
			}
		}
	}()
	for i := range n {
		wg.Go(func() {
			<-start
			o.add(stores[i%len(stores)].Reserve(context.Background(), req(i)))
		})
	}
	close(start)
	wg.Wait()
	done.Store(true)
	<-watcher
	for _, err := range o.errs {
		t.Errorf("Reserve failed: %v", err)
	}
	return &o
}

// settleAll commits every other admitted reservation (some above their hold) and
// releases the rest, then checks that nothing is held and the ledger adds up.
func settleAll(t *testing.T, f *fixture, o *outcomes, accountID string, balanceBefore ledger.Micros) {
	t.Helper()
	ctx := context.Background()
	var charged ledger.Micros
	for i, r := range o.admitted {
		if i%2 == 0 {
			res, err := f.s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: r.Amount/2 + int64(i%3)*r.Amount})
			if err != nil {
				t.Fatalf("Commit: %v", err)
			}
			charged += res.Charged
		} else {
			must(t, errOf(f.s.Release(ctx, r.ID, "test")))
		}
	}
	a := f.getAccount(t, accountID)
	if a.Reserved != 0 || a.InFlight != 0 || a.InFlightHighCost != 0 || a.Balance != balanceBefore-charged {
		t.Errorf("after settling: %+v; want nothing held and balance %d", a, balanceBefore-charged)
	}
	f.checkInvariants(t)
}

const concurrentRequests = 1000

// hammerLockWait is the lock wait (statement lock_timeout and account gate) of the stores
// the hammer tests use. They are about which calls a limit admits; with the default wait
// (half a second without progress on the account) a machine that stalls the thousand
// queued calls that long would answer some of them "busy" instead: the account gate's
// business (gate.go), not these tests'.
const hammerLockWait = 30 * time.Second

func TestConcurrentReservationsOnOneAccount(t *testing.T) {
	t.Parallel()
	const amount = 7_000

	tests := []struct {
		name       string
		balance    ledger.Micros
		daily      *ledger.Micros
		monthly    *ledger.Micros
		tier       ledger.Tier
		pool       ledger.Pool
		amount     ledger.Micros
		wantAdmit  int
		wantReason ledger.Reason
		wantLimit  string
		wantRetry  int
	}{
		{name: "credits", balance: 1_000_000, tier: bulkTier, pool: ledger.PoolGeneral, amount: amount,
			wantAdmit: 1_000_000 / amount, wantReason: ledger.ReasonInsufficientCredits},
		{name: "daily limit", balance: 1 << 40, daily: ptr[ledger.Micros](500_000), tier: bulkTier,
			pool: ledger.PoolGeneral, amount: amount, wantAdmit: 500_000 / amount,
			wantReason: ledger.ReasonKeyLimitReached, wantLimit: "daily",
			wantRetry: secondsUntil(t0, time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC))},
		{name: "monthly limit", balance: 1 << 40, monthly: ptr[ledger.Micros](300_000), tier: bulkTier,
			pool: ledger.PoolGeneral, amount: amount, wantAdmit: 300_000 / amount,
			wantReason: ledger.ReasonKeyLimitReached, wantLimit: "monthly",
			wantRetry: secondsUntil(t0, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))},
		{name: "general pool", balance: 1 << 40,
			tier: ledger.Tier{Name: "pool16", RPMBeforeTopUp: 1 << 30, RPMAfterTopUp: 1 << 30, InFlightGeneral: 16, InFlightHighCost: 8},
			pool: ledger.PoolGeneral, amount: 0, wantAdmit: 16,
			wantReason: ledger.ReasonConcurrencyLimitExceeded, wantLimit: "general", wantRetry: 5},
		{name: "high-cost pool", balance: 1 << 40,
			tier: ledger.Tier{Name: "pool64", RPMBeforeTopUp: 1 << 30, RPMAfterTopUp: 1 << 30, InFlightGeneral: 64, InFlightHighCost: 8},
			pool: ledger.PoolHighCost, amount: amount, wantAdmit: 8,
			wantReason: ledger.ReasonConcurrencyLimitExceeded, wantLimit: "high_cost", wantRetry: 5},
		{name: "requests per minute", balance: 1 << 40,
			tier: ledger.Tier{Name: "rpm50", RPMBeforeTopUp: 50, RPMAfterTopUp: 50, InFlightGeneral: 1 << 30, InFlightHighCost: 1 << 30},
			pool: ledger.PoolGeneral, amount: amount, wantAdmit: 50,
			wantReason: ledger.ReasonRateLimitExceeded, wantLimit: "rpm", wantRetry: 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixtureWith(t, 20, store.Options{LockTimeout: hammerLockWait})
			f.tier(t, tt.tier)
			a := f.account(t, tt.tier.Name, tt.balance)
			k, _ := f.key(t, a.ID, func(nk *ledger.NewKey) { nk.DailyLimit, nk.MonthlyLimit = tt.daily, tt.monthly })
			o := hammer(t, f, []*store.Store{f.s}, concurrentRequests, a.ID, func(i int) ledger.ReserveRequest {
				return ledger.ReserveRequest{RequestID: reqID(), KeyID: k.ID, Model: "m", Amount: tt.amount, Pool: tt.pool}
			}, tt.tier)

			if len(o.admitted) != tt.wantAdmit || o.byReason[tt.wantReason] != concurrentRequests-tt.wantAdmit {
				t.Fatalf("admitted %d, refusals %v; want exactly %d admitted and the rest %v",
					len(o.admitted), o.byReason, tt.wantAdmit, tt.wantReason)
			}
			for _, r := range o.refusals {
				if r.Limit != tt.wantLimit || r.RetryAfter != tt.wantRetry {
					t.Fatalf("refusal %+v, want limit %q and Retry-After %d", r, tt.wantLimit, tt.wantRetry)
				}
			}
			mid := f.getAccount(t, a.ID)
			if mid.Reserved != int64(tt.wantAdmit)*tt.amount || mid.InFlight != tt.wantAdmit {
				t.Errorf("account while held: %+v", mid)
			}
			f.checkInvariants(t)
			settleAll(t, f, o, a.ID, tt.balance)
		})
	}
}

// Two Store instances, each with its own pool, admit for one account at once: the
// decision is in the database, so the limits stay exact.
func TestTwoStoresShareLimits(t *testing.T) {
	t.Parallel()
	clk := &clock{t: t0}
	url := storetest.NewDB(t)
	opts := store.Options{Now: clk.Now, MaxConns: 10, LockTimeout: hammerLockWait}
	s1 := store.New(storetest.NewPoolWith(t, url, opts), opts)
	pool2 := storetest.NewPoolWith(t, url, opts)
	s2 := store.New(pool2, opts)
	f := &fixture{s: s1, pool: pool2, clk: clk}
	f.tier(t, bulkTier)

	const amount = 3_000
	a := f.account(t, bulkTier.Name, 600_000)
	k, _ := f.key(t, a.ID, func(nk *ledger.NewKey) { nk.DailyLimit = ptr[ledger.Micros](450_000) })
	o := hammer(t, f, []*store.Store{s1, s2}, concurrentRequests, a.ID, func(int) ledger.ReserveRequest {
		return ledger.ReserveRequest{RequestID: reqID(), KeyID: k.ID, Model: "m", Amount: amount, Pool: ledger.PoolGeneral}
	}, bulkTier)
	if len(o.admitted) != 450_000/amount || o.byReason[ledger.ReasonKeyLimitReached] != concurrentRequests-450_000/amount {
		t.Fatalf("admitted %d, refusals %v; want %d", len(o.admitted), o.byReason, 450_000/amount)
	}
	// Now credits bind: 150,000 left to reserve on another key.
	k2, _ := f.key(t, a.ID, nil)
	o2 := hammer(t, f, []*store.Store{s2, s1}, 200, a.ID, func(int) ledger.ReserveRequest {
		return ledger.ReserveRequest{RequestID: reqID(), KeyID: k2.ID, Model: "m", Amount: amount, Pool: ledger.PoolGeneral}
	}, bulkTier)
	if len(o2.admitted) != 150_000/amount || o2.byReason[ledger.ReasonInsufficientCredits] != 200-150_000/amount {
		t.Fatalf("second key: admitted %d, refusals %v; want %d", len(o2.admitted), o2.byReason, 150_000/amount)
	}
	o.admitted = append(o.admitted, o2.admitted...)
	settleAll(t, f, o, a.ID, 600_000)
}

// Two Store instances reserve on two busy accounts at once and settle each other's
// reservations (as replicas behind a round robin do; the settling store has not cached
// the reservation's account): every charge a caller was told of is in the balances, no
// hold is left, no operation fails, and the ledger's invariants hold.
func TestTwoStoresSettleEachOther(t *testing.T) {
	t.Parallel()
	clk := &clock{t: t0}
	url := storetest.NewDB(t)
	opts := store.Options{Now: clk.Now, MaxConns: 8, LockTimeout: hammerLockWait}
	pool := storetest.NewPoolWith(t, url, opts)
	stores := []*store.Store{store.New(pool, opts), store.New(storetest.NewPoolWith(t, url, opts), opts)}
	f := &fixture{s: stores[0], pool: pool, clk: clk}
	f.tier(t, bulkTier)
	const topUp, amount = 300_000, 3_000
	accounts := []ledger.Account{f.account(t, bulkTier.Name, topUp), f.account(t, bulkTier.Name, topUp)}
	var keys []string
	for _, a := range accounts {
		k, _ := f.key(t, a.ID, nil)
		keys = append(keys, k.ID)
	}
	ctx := context.Background()
	var charged [2]atomic.Int64
	var wg sync.WaitGroup
	for g := range 24 {
		wg.Go(func() {
			for i := range 20 {
				a := (g + i) % 2
				r, err := stores[(g+i)%2].Reserve(ctx, ledger.ReserveRequest{RequestID: reqID(), KeyID: keys[a], Model: "m",
					Amount: amount, Pool: ledger.PoolGeneral})
				if ledger.ReasonOf(err) == ledger.ReasonInsufficientCredits {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				other := stores[(g+i+1)%2]
				if i%4 == 0 {
					if _, err := other.Release(ctx, r.ID, "test"); err != nil {
						t.Error(err)
					}
					continue
				}
				c, err := other.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: amount - int64(i)})
				if err != nil {
					t.Error(err)
					continue
				}
				charged[a].Add(c.Charged)
			}
		})
	}
	wg.Wait()
	for i, a := range accounts {
		got := f.getAccount(t, a.ID)
		if want := topUp - charged[i].Load(); got.Balance != want || got.Reserved != 0 || got.InFlight != 0 {
			t.Errorf("account %d = %+v, want balance %d (the charges told) and nothing held", i, got, want)
		}
	}
	f.checkInvariants(t)
}
