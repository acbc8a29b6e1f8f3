package ledgerclient

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/client"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// replicaLedger is one accounting replica as extproc sees it: it answers Authenticate,
// or hangs until the caller gives up (a paused process), or answers UNAVAILABLE (no
// owner yet), as the test says.
type replicaLedger struct {
	accountingv1.UnimplementedLedgerServiceServer
	calls       atomic.Int64
	hang        atomic.Bool
	unavailable atomic.Bool
}

func (r *replicaLedger) Authenticate(ctx context.Context, _ *accountingv1.AuthenticateRequest) (*accountingv1.AuthenticateResponse, error) {
	r.calls.Add(1)
	if r.hang.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if r.unavailable.Load() {
		return nil, status.Error(codes.Unavailable, "no ledger owner yet")
	}
	return &accountingv1.AuthenticateResponse{Grant: &accountingv1.KeyGrant{KeyId: "k1", AccountId: "a1", Tier: "default"}}, nil
}

// replicas serves n replicaLedgers and returns them with a Client dialled as extproc
// dials accounting: a list of the replicas' addresses, with DialOptions.
func replicas(t *testing.T, n int) ([]*replicaLedger, *Client) {
	t.Helper()
	var rs []*replicaLedger
	var addrs []string
	for range n {
		r := &replicaLedger{}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gs := grpc.NewServer()
		accountingv1.RegisterLedgerServiceServer(gs, r)
		go func() { _ = gs.Serve(lis) }()
		t.Cleanup(gs.Stop)
		rs, addrs = append(rs, r), append(addrs, lis.Addr().String())
	}
	conn, err := client.Dial(context.Background(), strings.Join(addrs, ","), "token", DialOptions(false)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return rs, New(accountingv1.NewLedgerServiceClient(conn), Options{})
}

// admitBudget is the deadline of the calls below: the admission's (lifecycle).
const admitBudget = 1500 * time.Millisecond

// authenticateMany makes n Authenticate calls, workers at a time, each with the
// admission's deadline, and returns how many failed.
func authenticateMany(c *Client, n, workers int) int64 {
	var failed atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				ctx, cancel := context.WithTimeout(context.Background(), admitBudget)
				if _, err := c.Authenticate(ctx, []byte("key")); err != nil {
					failed.Add(1)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	return failed.Load()
}

// TestAPausedReplicaIsSkipped: of two replicas, one stops answering (its connection
// stays open, as a paused process's does). No call fails, and once its first calls
// ran out of time the client sends it only a probe now and then.
func TestAPausedReplicaIsSkipped(t *testing.T) {
	rs, c := replicas(t, 2)
	// Round robin spreads the calls once both connections are ready; the first calls
	// may all go to the one that connected first.
	for deadline := time.Now().Add(5 * time.Second); rs[0].calls.Load() == 0 || rs[1].calls.Load() == 0; {
		if failed := authenticateMany(c, 20, 2); failed != 0 {
			t.Fatalf("%d calls failed with both replicas up", failed)
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls %d and %d: not spread over both replicas", rs[0].calls.Load(), rs[1].calls.Load())
		}
	}
	rs[1].hang.Store(true)
	before := rs[1].calls.Load()
	start := time.Now()
	const n, workers = 400, 8
	if failed := authenticateMany(c, n, workers); failed != 0 {
		t.Errorf("%d of %d calls failed with one replica paused", failed, n)
	}
	took := time.Since(start)
	stuck := rs[1].calls.Load() - before
	// The first calls of each worker may go there, then a probe a second.
	if limit := int64(2*workers) + int64(took/ProbeEvery) + 1; stuck > limit {
		t.Errorf("%d of %d calls went to the paused replica in %v (want at most %d)", stuck, n, took, limit)
	}
	t.Logf("%d calls in %v, %d of them to the paused replica", n, took, stuck)

	rs[1].hang.Store(false)
	time.Sleep(ProbeEvery + 100*time.Millisecond)
	before = rs[1].calls.Load()
	if failed := authenticateMany(c, 40, 2); failed != 0 {
		t.Fatalf("%d calls failed after the replica resumed", failed)
	}
	if rs[1].calls.Load()-before < 10 {
		t.Errorf("the resumed replica got %d of 40 calls: not back in the rotation", rs[1].calls.Load()-before)
	}
}

// TestCallsWaitForAnOwner: while the ledger has no owner (the replicas answer
// UNAVAILABLE, as during a takeover) a call waits for one within its deadline, and is
// answered once there is.
func TestCallsWaitForAnOwner(t *testing.T) {
	rs, c := replicas(t, 2)
	for _, r := range rs {
		r.unavailable.Store(true)
	}
	time.AfterFunc(700*time.Millisecond, func() {
		for _, r := range rs {
			r.unavailable.Store(false)
		}
	})
	if failed := authenticateMany(c, 16, 16); failed != 0 {
		t.Fatalf("%d of 16 calls failed during a takeover of 700 ms", failed)
	}
	// A call whose deadline passes first gets the error.
	for _, r := range rs {
		r.unavailable.Store(true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Authenticate(ctx, []byte("key")); status.Code(err) != codes.Unavailable {
		t.Fatalf("with no owner past the deadline: %v, want UNAVAILABLE", err)
	}
}
