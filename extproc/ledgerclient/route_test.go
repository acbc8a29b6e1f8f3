package ledgerclient_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// replicaFake is one accounting replica: the owner answers Reserve; a standby answers a
// call that asks for redirects with the owner's address and forwards (answers) the
// others, as accounting's standby does.
type replicaFake struct {
	accountingv1.UnimplementedLedgerServiceServer
	addr string
	gs   *grpc.Server

	mu         sync.Mutex
	owner      string // the owner's address; addr when this replica owns the ledger
	namesSelf  bool   // a fenced owner woken from a pause: not owning, it names itself
	redirected int    // calls answered with the owner's address
	forwarded  int    // calls of callers that do not follow redirects, made at the owner
	decided    int    // calls answered as the owner
}

func startReplica(t *testing.T) *replicaFake {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &replicaFake{addr: lis.Addr().String(), gs: grpc.NewServer()}
	r.owner = r.addr
	accountingv1.RegisterLedgerServiceServer(r.gs, r)
	go func() { _ = r.gs.Serve(lis) }()
	t.Cleanup(r.gs.Stop)
	return r
}

func (r *replicaFake) follow(owner *replicaFake) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owner = owner.addr
}

func (r *replicaFake) counts() (redirected, forwarded, decided int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.redirected, r.forwarded, r.decided
}

func (r *replicaFake) Reserve(ctx context.Context, req *accountingv1.ReserveRequest) (*accountingv1.ReserveResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.namesSelf:
		r.redirected++
		return nil, contract.NotOwnerStatus(r.addr)
	case r.owner == r.addr:
		r.decided++
	case len(md.Get(contract.RedirectHeader)) > 0:
		r.redirected++
		return nil, contract.NotOwnerStatus(r.owner)
	default:
		r.forwarded++
	}
	return &accountingv1.ReserveResponse{ReservationId: "r-" + req.GetRequestId(), AccountId: "a1", AmountMicros: req.GetAmountMicros()}, nil
}

func dialFake(t *testing.T) func(addr string) (*grpc.ClientConn, error) {
	return func(addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
}

// routedClient is a client whose own connection reaches only via, following redirects.
func routedClient(t *testing.T, via *replicaFake, follow bool) *ledgerclient.Client {
	t.Helper()
	conn, err := grpc.NewClient(via.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	opts := ledgerclient.Options{}
	if follow {
		opts.Dial = dialFake(t)
	}
	c := ledgerclient.New(accountingv1.NewLedgerServiceClient(conn), opts)
	t.Cleanup(func() { c.Close(); _ = conn.Close() })
	return c
}

func reserveAt(t *testing.T, c *ledgerclient.Client, id string) {
	t.Helper()
	r, err := c.Reserve(context.Background(), ledger.ReserveRequest{RequestID: id, KeyID: "k1", Amount: 10, Pool: ledger.PoolGeneral})
	if err != nil || r.ID != "r-"+id {
		t.Fatalf("reserve %s: %+v, %v", id, r, err)
	}
}

// A standby's answer moves the call, and every later one, to the owner it names: the
// standby is asked once.
func TestStandbyAnswerMovesCallsToTheOwner(t *testing.T) {
	owner, standby := startReplica(t), startReplica(t)
	standby.follow(owner)
	c := routedClient(t, standby, true)
	for i := range 5 {
		reserveAt(t, c, fmt.Sprint("r", i))
	}
	if red, fwd, _ := standby.counts(); red != 1 || fwd != 0 {
		t.Errorf("standby: %d redirected, %d forwarded; want 1 redirected (the first call), none forwarded", red, fwd)
	}
	if _, _, dec := owner.counts(); dec != 5 {
		t.Errorf("owner decided %d calls, want all 5", dec)
	}
}

// The owner gone (its calls fail UNAVAILABLE), the client forgets it; the next call
// goes through its own connection again and learns the new owner there.
func TestOwnerLostIsLearnedAgain(t *testing.T) {
	old, standby := startReplica(t), startReplica(t)
	standby.follow(old)
	c := routedClient(t, standby, true)
	reserveAt(t, c, "before")
	old.gs.Stop()
	_, err := c.Reserve(context.Background(), ledger.ReserveRequest{RequestID: "lost", KeyID: "k1", Amount: 10, Pool: ledger.PoolGeneral})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("reserve at the stopped owner: %v, want Unavailable", err)
	}
	// The standby took over.
	standby.follow(standby)
	reserveAt(t, c, "after")
	if _, _, dec := standby.counts(); dec != 1 {
		t.Errorf("the new owner decided %d calls, want 1", dec)
	}
}

// A client without Dial asks for no redirects: the standby forwards its calls.
func TestClientWithoutDialIsForwarded(t *testing.T) {
	owner, standby := startReplica(t), startReplica(t)
	standby.follow(owner)
	c := routedClient(t, standby, false)
	reserveAt(t, c, "a")
	reserveAt(t, c, "b")
	if red, fwd, _ := standby.counts(); red != 0 || fwd != 2 {
		t.Errorf("standby: %d redirected, %d forwarded; want 2 forwarded", red, fwd)
	}
}

// wokenReplica is a former owner woken from a pause, before it reads the new lease: it
// answers every call NotOwner naming itself, until 300 ms later it follows owner.
func wokenReplica(t *testing.T, owner *replicaFake) *replicaFake {
	woken := startReplica(t)
	woken.mu.Lock()
	woken.namesSelf = true
	woken.mu.Unlock()
	go func() {
		time.Sleep(300 * time.Millisecond)
		woken.mu.Lock()
		woken.namesSelf, woken.owner = false, owner.addr
		woken.mu.Unlock()
	}()
	return woken
}

// reserveWithin makes a reserve with the admission's budget of 1.5 s.
func reserveWithin(c *ledgerclient.Client) (ledger.Reservation, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	return c.Reserve(ctx, ledger.ReserveRequest{RequestID: "woken", KeyID: "k1", Amount: 10, Pool: ledger.PoolGeneral})
}

// A replica that names itself while it no longer owns the ledger does not fail the
// call: the client waits, within the caller's deadline, until it is told where the
// owner is.
func TestReplicaNamingItselfIsWaitedOut(t *testing.T) {
	owner := startReplica(t)
	c := routedClient(t, wokenReplica(t, owner), true)
	r, err := reserveWithin(c)
	if err != nil || r.ID != "r-woken" {
		t.Fatalf("reserve through a replica naming itself: %+v, %v; want it decided by the owner", r, err)
	}
	if _, _, dec := owner.counts(); dec != 1 {
		t.Errorf("the owner decided %d calls, want 1", dec)
	}
}

// A client that does not follow redirects meets a former owner woken from a pause that
// answers NotOwner: the call is waited out within its deadline like any UNAVAILABLE,
// not failed at once.
func TestNotOwnerWaitedOutWithoutRedirects(t *testing.T) {
	woken := wokenReplica(t, startReplica(t))
	conn, err := grpc.NewClient(woken.addr, append(ledgerclient.DialOptions(false), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	c := ledgerclient.New(accountingv1.NewLedgerServiceClient(conn), ledgerclient.Options{})
	t.Cleanup(func() { c.Close(); _ = conn.Close() })
	r, err := reserveWithin(c)
	if err != nil || r.ID != "r-woken" {
		t.Fatalf("reserve through a former owner answering NotOwner: %+v, %v; want it answered once the replica forwards", r, err)
	}
}
