package ledgerclient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// gatedAccounting is accounting on a store (in memory unless said), with every call
// recorded (Apply with its number of operations) and the first Reserve held until gate
// is closed, so that the calls behind it queue in the client.
type gatedAccounting struct {
	led       *ledgerclient.Client
	admin     accountingv1.AdminServiceClient
	account   string
	keyID     string
	held      chan struct{} // closed when the first Reserve reached accounting
	gate      chan struct{}
	noAppl    bool // answer Apply with Unimplemented, as an accounting that predates it
	loseApply bool // make each Apply, then lose its answer (Unavailable); under mu

	mu    sync.Mutex
	calls []string
	first bool // the next Reserve is held at the gate
}

// set changes the gate's settings between calls.
func (g *gatedAccounting) set(holdNextReserve, loseApply bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.first, g.loseApply = holdNextReserve, loseApply
}

func startGated(t *testing.T, balance int64, opts ledgerclient.Options) *gatedAccounting {
	t.Helper()
	return startGatedOn(t, servertest.NewMemory(), balance, opts)
}

func startGatedOn(t *testing.T, st ledger.Store, balance int64, opts ledgerclient.Options) *gatedAccounting {
	t.Helper()
	g := &gatedAccounting{held: make(chan struct{}), gate: make(chan struct{}), first: true}
	intercept := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		name, ledgerCall := strings.CutPrefix(info.FullMethod, "/accounting.v1.LedgerService/")
		if !ledgerCall {
			return handler(ctx, req)
		}
		g.mu.Lock()
		if a, ok := req.(*accountingv1.ApplyRequest); ok {
			name = fmt.Sprintf("Apply(%d)", len(a.GetOps()))
		}
		g.calls = append(g.calls, name)
		wait := g.first && name == "Reserve"
		if wait {
			g.first = false
		}
		lose := g.loseApply
		g.mu.Unlock()
		if wait {
			close(g.held)
			<-g.gate
		}
		if g.noAppl && strings.HasPrefix(name, "Apply") {
			return nil, status.Error(codes.Unimplemented, "unknown method Apply")
		}
		resp, err := handler(ctx, req)
		if lose && strings.HasPrefix(name, "Apply") {
			return nil, status.Error(codes.Unavailable, "connection lost after the Apply was made")
		}
		return resp, err
	}
	f := servertest.Start(t, st, servertest.Options{
		ServerOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(intercept)},
	})
	g.admin = f.Admin(t, servertest.AdminToken)
	accounts, keys := accountsWithKeys(t, g.admin, "", 1, balance)
	g.account, g.keyID = accounts[0], keys[0]
	g.led = ledgerclient.New(f.Ledger(t, servertest.ServiceToken), opts)
	return g
}

func (g *gatedAccounting) reserve(ctx context.Context, id string, amount int64) (ledger.Reservation, error) {
	return g.led.Reserve(ctx, ledger.ReserveRequest{RequestID: id, KeyID: g.keyID, Amount: amount, Pool: ledger.PoolGeneral})
}

func (g *gatedAccounting) callLog() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calls...)
}

// wantCalls checks the calls accounting received so far, in order, written as
// "[Reserve Apply(2) ...]".
func (g *gatedAccounting) wantCalls(t *testing.T, want string) {
	t.Helper()
	if got := fmt.Sprint(g.callLog()); got != want {
		t.Errorf("calls = %s, want %s", got, want)
	}
}

// never is a StaleAfter no test reaches: the held call keeps its slot until the test
// opens the gate.
const never = time.Hour

// queued waits until n operations wait in the client's queue.
func (g *gatedAccounting) queued(t *testing.T, n int) {
	t.Helper()
	for ledgerclient.Queued(g.led) != n {
		time.Sleep(time.Millisecond)
	}
}

// While a call is in flight, the calls behind it queue and go as one Apply, each
// answered as its own call would be: refusals included.
func TestCallsBehindOneInFlightGoAsOneApply(t *testing.T) {
	g := startGated(t, 1_000, ledgerclient.Options{MaxInFlight: 1, StaleAfter: never})
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { _, err := g.reserve(ctx, "first", 100); first <- err }()
	<-g.held

	type answer struct {
		res ledger.Reservation
		err error
	}
	answers := make([]answer, 4)
	var wg sync.WaitGroup
	for i, amount := range []int64{100, 200, 5_000, 300} { // the third is more than the balance
		wg.Go(func() {
			r, err := g.reserve(ctx, fmt.Sprintf("queued-%d", i), amount)
			answers[i] = answer{r, err}
		})
	}
	g.queued(t, 4)
	close(g.gate)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, a := range answers {
		if i == 2 {
			if ledger.ReasonOf(a.err) != ledger.ReasonInsufficientCredits {
				t.Errorf("over-balance reserve: %v, want an insufficient_credits refusal", a.err)
			}
			continue
		}
		if a.err != nil || a.res.ID == "" || a.res.State != ledger.StateHeld {
			t.Errorf("queued reserve %d: %+v, %v", i, a.res, a.err)
		}
	}
	g.wantCalls(t, "[Reserve Apply(4)]")

	// With nothing in flight, the next operation is a call of its own again.
	if _, err := g.led.Commit(ctx, ledger.CommitRequest{ReservationID: answers[0].res.ID, Actual: 50}); err != nil {
		t.Fatal(err)
	}
	g.wantCalls(t, "[Reserve Apply(4) Commit]")
}

// A caller that gives up while its operation is queued takes it back: no Apply carries
// it, and nothing is reserved for it.
func TestAbandonedQueuedCallIsNeverSent(t *testing.T) {
	g := startGated(t, 1_000, ledgerclient.Options{MaxInFlight: 1, StaleAfter: never})
	ctx := context.Background()
	go func() { _, _ = g.reserve(ctx, "first", 100) }()
	<-g.held

	gone, cancel := context.WithCancel(ctx)
	abandoned := make(chan error, 1)
	go func() { _, err := g.reserve(gone, "abandoned", 100); abandoned <- err }()
	g.queued(t, 1)
	kept := make(chan error, 1)
	go func() { _, err := g.reserve(ctx, "kept", 100); kept <- err }()
	g.queued(t, 2)
	cancel()
	if err := <-abandoned; status.Code(err) != codes.Canceled {
		t.Fatalf("abandoned reserve: %v, want Canceled", err)
	}
	close(g.gate)
	if err := <-kept; err != nil {
		t.Fatal(err)
	}
	g.wantCalls(t, "[Reserve Apply(1)]")
}

// An operation whose context carries a trace is always its own call (its span and
// trace context reach accounting), even while the slot is taken.
func TestTracedCallIsNeverCoalesced(t *testing.T) {
	g := startGated(t, 1_000, ledgerclient.Options{MaxInFlight: 1, StaleAfter: never})
	ctx := context.Background()
	go func() { _, _ = g.reserve(ctx, "first", 100) }()
	<-g.held
	traced := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}}))
	if _, err := g.reserve(traced, "traced", 100); err != nil {
		t.Fatal(err)
	}
	close(g.gate)
	g.wantCalls(t, "[Reserve Reserve]")
}

// An accounting that predates Apply answers it with Unimplemented: the operations it
// carried go as calls of their own, and so does every later one.
func TestAccountingWithoutApply(t *testing.T) {
	g := startGated(t, 1_000, ledgerclient.Options{MaxInFlight: 1, StaleAfter: never})
	g.noAppl = true
	ctx := context.Background()
	go func() { _, _ = g.reserve(ctx, "first", 100) }()
	<-g.held
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = g.reserve(ctx, fmt.Sprintf("queued-%d", i), 100) })
	}
	g.queued(t, 2)
	close(g.gate)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// Later calls queue no more, even with one in flight.
	var later sync.WaitGroup
	for i := range 3 {
		later.Go(func() {
			if _, err := g.reserve(ctx, fmt.Sprintf("later-%d", i), 10); err != nil {
				t.Error(err)
			}
		})
	}
	later.Wait()
	g.wantCalls(t, "[Reserve Apply(2) Reserve Reserve Reserve Reserve Reserve]")
}

// MaxInFlight negative: every operation is a call of its own.
func TestCoalescingOff(t *testing.T) {
	g := startGated(t, 1_000, ledgerclient.Options{MaxInFlight: -1})
	ctx := context.Background()
	go func() { _, _ = g.reserve(ctx, "first", 100) }()
	<-g.held
	if _, err := g.reserve(ctx, "second", 100); err != nil {
		t.Fatal(err)
	}
	close(g.gate)
	g.wantCalls(t, "[Reserve Reserve]")
}

// A call held longer than StaleAfter no longer holds its slot: the operations queued
// behind it go without it (here, while it is still held), so one slow operation never
// stalls the others.
func TestStaleCallGivesUpItsSlot(t *testing.T) {
	g := startGated(t, 1_000, ledgerclient.Options{MaxInFlight: 1, StaleAfter: time.Millisecond})
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { _, err := g.reserve(ctx, "first", 100); first <- err }()
	<-g.held
	// Each of these completes while the first is still held; the gate opens after.
	for i := range 3 {
		if _, err := g.reserve(ctx, fmt.Sprintf("behind-%d", i), 100); err != nil {
			t.Fatal(err)
		}
	}
	close(g.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	log := g.callLog()
	if len(log) != 4 || log[0] != "Reserve" {
		t.Fatalf("calls = %v, want the held Reserve, then three operations that went without it", log)
	}
}
