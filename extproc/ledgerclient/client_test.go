package ledgerclient

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/internal/testkit"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// fakeLedger is a hand-written LedgerService: one valid key, scripted refusals, and a
// change stream driven by the test.
type fakeLedger struct {
	accountingv1.UnimplementedLedgerServiceServer
	mu      sync.Mutex
	auths   int
	changes chan *accountingv1.WatchChangesResponse
	// endWatch ends the current WatchChanges call with an error.
	endWatch chan struct{}
}

var _ accountingv1.LedgerServiceServer = (*fakeLedger)(nil)

func refused(code codes.Code, r *accountingv1.Refusal) error {
	st, _ := status.New(code, "refused").WithDetails(r)
	return st.Err()
}

func (f *fakeLedger) Authenticate(_ context.Context, r *accountingv1.AuthenticateRequest) (*accountingv1.AuthenticateResponse, error) {
	f.mu.Lock()
	f.auths++
	f.mu.Unlock()
	if string(r.GetKeyHash()) != "good" {
		return nil, refused(codes.Unauthenticated, &accountingv1.Refusal{Reason: accountingv1.Reason_REASON_INVALID_API_KEY})
	}
	limit := int64(5)
	return &accountingv1.AuthenticateResponse{Grant: &accountingv1.KeyGrant{
		KeyId: "k1", AccountId: "a1", Tier: "default", AccountToppedUp: true, DailyLimitMicros: &limit,
	}}, nil
}

func (f *fakeLedger) Reserve(_ context.Context, r *accountingv1.ReserveRequest) (*accountingv1.ReserveResponse, error) {
	if r.GetAmountMicros() > 100 {
		return nil, refused(codes.ResourceExhausted, &accountingv1.Refusal{
			Reason: accountingv1.Reason_REASON_KEY_LIMIT_REACHED, RetryAfterSeconds: 42, Limit: "daily"})
	}
	if r.GetPool() != accountingv1.Pool_POOL_HIGH_COST {
		return nil, status.Error(codes.Internal, "want high cost pool")
	}
	return &accountingv1.ReserveResponse{ReservationId: "r-" + r.GetRequestId(), AccountId: "a1", AmountMicros: r.GetAmountMicros()}, nil
}

func (f *fakeLedger) WatchChanges(_ *accountingv1.WatchChangesRequest, s grpc.ServerStreamingServer[accountingv1.WatchChangesResponse]) error {
	for {
		select {
		case c := <-f.changes:
			if err := s.Send(c); err != nil {
				return err
			}
		case <-f.endWatch:
			return status.Error(codes.Unavailable, "going away")
		case <-s.Context().Done():
			return nil
		}
	}
}

func (f *fakeLedger) authCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.auths
}

func start(t *testing.T) (*fakeLedger, *Client) {
	t.Helper()
	f := &fakeLedger{changes: make(chan *accountingv1.WatchChangesResponse), endWatch: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	accountingv1.RegisterLedgerServiceServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(); gs.Stop() })
	return f, New(accountingv1.NewLedgerServiceClient(conn), Options{MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
}

func TestKeyCacheFollowsTheWatchStream(t *testing.T) {
	f, c := start(t)
	ctx := context.Background()
	auth := func() ledger.Grant {
		t.Helper()
		g, err := c.Authenticate(ctx, []byte("good"))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// Not connected: no caching.
	auth()
	auth()
	if n := f.authCount(); n != 2 {
		t.Fatalf("before the watch: %d RPCs, want 2", n)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go c.Watch(wctx)
	f.changes <- &accountingv1.WatchChangesResponse{Kind: accountingv1.ChangeKind_CHANGE_KIND_RESET}
	testkit.WaitFor(t, "the watch stream to connect", c.Connected)
	g := auth()
	auth()
	if n := f.authCount(); n != 3 {
		t.Fatalf("connected: %d RPCs, want 3 (second call cached)", n)
	}
	if g.KeyID != "k1" || g.DailyLimit == nil || *g.DailyLimit != 5 || !g.AccountToppedUp || g.ExpiresAt != nil {
		t.Errorf("grant = %+v", g)
	}
	// send delivers a change and waits until the client applied it.
	send := func(ch *accountingv1.WatchChangesResponse) {
		c.mu.Lock()
		gen := c.gen
		c.mu.Unlock()
		f.changes <- ch
		testkit.WaitFor(t, "the cache to change generation", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.gen > gen })
	}
	// A change to another account keeps the entry; a RESET drops it.
	send(&accountingv1.WatchChangesResponse{Kind: accountingv1.ChangeKind_CHANGE_KIND_ACCOUNT, AccountId: "other"})
	auth()
	if n := f.authCount(); n != 3 {
		t.Fatalf("after another account's change: %d RPCs, want 3", n)
	}
	send(&accountingv1.WatchChangesResponse{Kind: accountingv1.ChangeKind_CHANGE_KIND_RESET})
	auth()
	if n := f.authCount(); n != 4 {
		t.Fatalf("after reset: %d RPCs, want 4", n)
	}
	auth()
	send(&accountingv1.WatchChangesResponse{Kind: accountingv1.ChangeKind_CHANGE_KIND_KEY, KeyId: "k1"})
	auth()
	if n := f.authCount(); n != 5 {
		t.Fatalf("after key change: %d RPCs, want 5", n)
	}
	// Stream loss: nothing cached until a new RESET.
	f.endWatch <- struct{}{}
	testkit.WaitFor(t, "the watch stream to break", func() bool { return !c.Connected() })
	auth()
	auth()
	if n := f.authCount(); n != 7 {
		t.Fatalf("stream down: %d RPCs, want 7", n)
	}
	f.changes <- &accountingv1.WatchChangesResponse{Kind: accountingv1.ChangeKind_CHANGE_KIND_RESET}
	testkit.WaitFor(t, "the watch stream to connect", c.Connected)
}

func TestMaxAge(t *testing.T) {
	f, c := start(t)
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	c.opts.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Watch(ctx)
	f.changes <- &accountingv1.WatchChangesResponse{Kind: accountingv1.ChangeKind_CHANGE_KIND_RESET}
	testkit.WaitFor(t, "the watch stream to connect", c.Connected)
	_, _ = c.Authenticate(ctx, []byte("good"))
	_, _ = c.Authenticate(ctx, []byte("good"))
	mu.Lock()
	now = now.Add(DefaultMaxAge)
	mu.Unlock()
	_, _ = c.Authenticate(ctx, []byte("good"))
	if n := f.authCount(); n != 2 {
		t.Fatalf("%d RPCs, want 2 (one cached, one expired)", n)
	}
}

func TestRefusalsFromStatusDetails(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	_, err := c.Authenticate(ctx, []byte("bad"))
	if !errors.Is(err, &ledger.Refusal{Reason: ledger.ReasonInvalidAPIKey}) {
		t.Errorf("authenticate: %v", err)
	}
	_, err = c.Reserve(ctx, ledger.ReserveRequest{RequestID: "x", Amount: 1000, Pool: ledger.PoolHighCost})
	var r *ledger.Refusal
	if !errors.As(err, &r) || r.Reason != ledger.ReasonKeyLimitReached || r.RetryAfter != 42 || r.Limit != "daily" {
		t.Errorf("reserve: %v", err)
	}
	res, err := c.Reserve(ctx, ledger.ReserveRequest{RequestID: "x", Amount: 10, Pool: ledger.PoolHighCost})
	if err != nil || res.ID != "r-x" || res.Amount != 10 {
		t.Errorf("reserve = %+v, %v", res, err)
	}
	// A status without a Refusal detail stays a plain error.
	_, err = c.Commit(ctx, ledger.CommitRequest{ReservationID: "r"})
	if ledger.ReasonOf(err) != 0 || status.Code(err) != codes.Unimplemented {
		t.Errorf("commit: %v", err)
	}
}

// TestUnknownKeyCachedBriefly: an invalid_api_key refusal is cached for NegativeMaxAge
// while the stream is up, then asked again; a key change drops it at once.
func TestUnknownKeyCachedBriefly(t *testing.T) {
	f, c := start(t)
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	c.opts.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Watch(ctx)
	f.changes <- &accountingv1.WatchChangesResponse{Kind: accountingv1.ChangeKind_CHANGE_KIND_RESET}
	testkit.WaitFor(t, "the watch stream to connect", c.Connected)
	bad := func() {
		t.Helper()
		_, err := c.Authenticate(ctx, []byte("bad"))
		var ref *ledger.Refusal
		if !errors.As(err, &ref) || ref.Reason != ledger.ReasonInvalidAPIKey {
			t.Fatalf("err = %v, want invalid_api_key", err)
		}
	}
	bad()
	bad()
	if n := f.authCount(); n != 1 {
		t.Fatalf("%d RPCs, want 1 (refusal cached)", n)
	}
	mu.Lock()
	now = now.Add(DefaultNegativeMaxAge)
	mu.Unlock()
	bad()
	if n := f.authCount(); n != 2 {
		t.Fatalf("%d RPCs, want 2 (cached refusal expired)", n)
	}
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	f.changes <- &accountingv1.WatchChangesResponse{Kind: accountingv1.ChangeKind_CHANGE_KIND_KEY, KeyId: "k-new"}
	testkit.WaitFor(t, "the cache to change generation", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.gen > gen })
	bad()
	if n := f.authCount(); n != 3 {
		t.Fatalf("%d RPCs, want 3 (a key change drops cached refusals)", n)
	}
}
