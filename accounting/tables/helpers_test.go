package tables_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine"
	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

func TestMain(m *testing.M) { tablestest.Main(m) }

// t0 is the tests' usual "now": mid-minute, mid-day, mid-month.
var t0 = time.Date(2026, 3, 14, 12, 0, 30, 500_000_000, time.UTC)

// clock is a settable clock for the engine's and the reports' Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// fixture is the journal engine on a fresh database with a settable clock, its derived
// tables (the package under test) and the pool under them.
type fixture struct {
	s    engine.Store
	pool *pgxpool.Pool
	clk  *clock
}

func newFixture(t *testing.T, maxConns int32) *fixture {
	t.Helper()
	clk := &clock{t: t0}
	pool := tablestest.NewPool(t, tablestest.NewDB(t), maxConns)
	s, _ := enginetest.StartAt(t, pool, clk.Now)
	return &fixture{s: s, pool: pool, clk: clk}
}

// caughtUp waits until the tables hold every decision durable now.
func (f *fixture) caughtUp(t *testing.T) {
	t.Helper()
	if _, err := f.s.ListAccounts(context.Background(), ledger.AccountQuery{Limit: 1}); err != nil {
		t.Fatal(err)
	}
}

// bulkTier has limits large enough that only the limit a test is about can bite.
var bulkTier = ledger.Tier{Name: "bulk", RPMBeforeTopUp: 1_000_000, RPMAfterTopUp: 1_000_000,
	InFlightGeneral: 1_000_000, InFlightHighCost: 1_000_000}

func (f *fixture) tier(t *testing.T, tier ledger.Tier) {
	t.Helper()
	if _, err := f.s.PutTier(context.Background(), tier); err != nil {
		t.Fatalf("PutTier: %v", err)
	}
}

// account creates an account in tier, topped up with balance when it is positive.
func (f *fixture) account(t *testing.T, tier string, balance ledger.Micros) ledger.Account {
	t.Helper()
	ctx := context.Background()
	a, err := f.s.CreateAccount(ctx, ledger.NewAccount{Tier: tier})
	if err != nil {
		t.Fatalf("CreateAccount(%q): %v", tier, err)
	}
	if balance > 0 {
		if a, err = f.s.TopUp(ctx, a.ID, balance, ""); err != nil {
			t.Fatalf("TopUp: %v", err)
		}
	}
	return a
}

// key creates a key on accountID; edit changes the NewKey before it is stored. It
// returns the key and the hash of its secret.
func (f *fixture) key(t *testing.T, accountID string, edit func(*ledger.NewKey)) (ledger.Key, []byte) {
	t.Helper()
	secret := make([]byte, 24)
	_, _ = rand.Read(secret)
	h := sha256.Sum256(secret)
	nk := ledger.NewKey{AccountID: accountID, Name: "test", Hash: h[:], Prefix: fmt.Sprintf("sk-%x", secret[:2])}
	if edit != nil {
		edit(&nk)
	}
	k, err := f.s.CreateKey(context.Background(), nk)
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	return k, h[:]
}

var reqSeq atomic.Int64

// reqID returns a request id unique within the test binary.
func reqID() string { return fmt.Sprintf("req-%d", reqSeq.Add(1)) }

func (f *fixture) reserve(t *testing.T, keyID string, amount ledger.Micros, pool ledger.Pool) (ledger.Reservation, error) {
	t.Helper()
	return f.s.Reserve(context.Background(), ledger.ReserveRequest{
		RequestID: reqID(), KeyID: keyID, Model: "demo-chat", Amount: amount, Pool: pool})
}

func (f *fixture) mustReserve(t *testing.T, keyID string, amount ledger.Micros, pool ledger.Pool) ledger.Reservation {
	t.Helper()
	r, err := f.reserve(t, keyID, amount, pool)
	if err != nil {
		t.Fatalf("Reserve(%d): %v", amount, err)
	}
	return r
}

func (f *fixture) getAccount(t *testing.T, id string) ledger.Account {
	t.Helper()
	a, err := f.s.GetAccount(context.Background(), id)
	if err != nil {
		t.Fatalf("GetAccount: %v", err)
	}
	return a
}

// checkInvariants fails t when the ledger's invariants do not hold in the tables, once
// they hold every decision.
func (f *fixture) checkInvariants(t *testing.T) {
	t.Helper()
	f.caughtUp(t)
	if err := tablestest.CheckInvariants(context.Background(), f.pool); err != nil {
		t.Fatalf("ledger invariants: %v", err)
	}
}

// sweepers starts workers goroutines on wg that each, once start is closed, call step
// until it returns 0, adding what it returns to *total under mu (a failed step fails t
// and ends its goroutine): processes sweeping or archiving at once.
func sweepers(t *testing.T, wg *sync.WaitGroup, workers int, start <-chan struct{}, mu *sync.Mutex, total *int,
	step func() (int, error)) {
	for range workers {
		wg.Go(func() {
			<-start
			for {
				got, err := step()
				if err != nil {
					t.Errorf("sweep: %v", err)
					return
				}
				mu.Lock()
				*total += got
				mu.Unlock()
				if got == 0 {
					return
				}
			}
		})
	}
}

func wantReason(t *testing.T, err error, want ledger.Reason) {
	t.Helper()
	if got := ledger.ReasonOf(err); got != want {
		t.Fatalf("error = %v, want reason %v", err, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// errOf is the error of a call that returns a value too.
func errOf[T any](_ T, err error) error { return err }
