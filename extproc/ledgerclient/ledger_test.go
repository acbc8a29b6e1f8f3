package ledgerclient_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Many callers reserving, committing and releasing at once on a few accounts, through
// one client, against accounting on PostgreSQL: every
// answer is what the ledger did (the charges the callers were told of are exactly the
// accounts' spend, refusals changed nothing), and the ledger's invariants hold. Also with
// two accounting servers on one ledger, dialled as a list of their addresses, the
// client's calls spread over both (round robin, as over a headless Service).
func TestOperationsAgainstTheLedger(t *testing.T) {
	for _, replicas := range []int{1, 2} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			operationsAgainstTheLedger(t, replicas)
		})
	}
}

func operationsAgainstTheLedger(t *testing.T, replicas int) {
	ctx := context.Background()
	st, pool := enginetest.NewLedger(t, 8)
	served := make([]atomic.Int64, replicas) // ledger calls (not admin calls) each replica served
	addrs := make([]string, replicas)
	var f *servertest.Fixture
	for i := range addrs {
		count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if strings.HasPrefix(info.FullMethod, "/accounting.v1.LedgerService/") {
				served[i].Add(1)
			}
			return handler(ctx, req)
		}
		f = servertest.Start(t, st, servertest.Options{ServerOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(count)}})
		addrs[i] = f.Addr
	}
	admin := f.Admin(t, servertest.AdminToken)
	const accounts, topUp = 4, 10_000
	ids, keys := accountsWithKeys(t, admin, wideTier, accounts, topUp)
	// Two replicas as a list of addresses (client.Dial's own resolver).
	conn, err := client.Dial(ctx, strings.Join(addrs, ","), servertest.ServiceToken, ledgerclient.DialOptions(false)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	led := ledgerclient.New(accountingv1.NewLedgerServiceClient(conn), ledgerclient.Options{})

	charged := make([]atomic.Int64, accounts)
	var refusals atomic.Int64
	var wg sync.WaitGroup
	for g := range 48 {
		wg.Go(func() {
			for i := range 10 {
				a := (g + i) % accounts
				r, err := led.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprintf("r-%d-%d", g, i), KeyID: keys[a],
					Amount: 300, Pool: ledger.PoolGeneral})
				if ledger.ReasonOf(err) == ledger.ReasonInsufficientCredits {
					refusals.Add(1)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					if _, err := led.Release(ctx, r.ID, "test"); err != nil {
						t.Error(err)
					}
					continue
				}
				c, err := led.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: 200,
					Usage: ledger.Usage{InputTokens: 1, OutputTokens: 1}})
				if err != nil {
					t.Error(err)
					continue
				}
				charged[a].Add(c.Charged)
			}
		})
	}
	wg.Wait()
	// A list waits until the derived tables hold every decision made.
	if _, err := st.ListAccounts(ctx, ledger.AccountQuery{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if err := tablestest.CheckInvariants(ctx, pool); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		a, err := admin.GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: id})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := a.GetAccount().GetBalanceMicros(), topUp-charged[i].Load(); got != want || a.GetAccount().GetReservedMicros() != 0 {
			t.Errorf("account %d: balance %d reserved %d, want balance %d (the charges its callers were told of) and nothing held",
				i, got, a.GetAccount().GetReservedMicros(), want)
		}
	}
	if refusals.Load() == 0 {
		t.Error("no reserve was refused: the accounts' balances were meant to run out")
	}
	for i := range served {
		if served[i].Load() == 0 {
			t.Errorf("replica %d served no call: the calls were not spread", i)
		}
	}
	t.Logf("%d refusals", refusals.Load())
}

// Commits whose answers are lost after accounting made them (a connection cut) fail
// Unavailable, and each retried is answered as a replay: every hold committed once and
// charged once, on PostgreSQL.
func TestLostCommitAnswerReplaysOnce(t *testing.T) {
	ctx := context.Background()
	st, pool := enginetest.NewLedger(t, 8)
	var lose atomic.Bool
	loseCommits := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if lose.Load() && strings.HasSuffix(info.FullMethod, "/Commit") {
			return nil, status.Error(codes.Unavailable, "connection lost after the commit was made")
		}
		return resp, err
	}
	f := servertest.Start(t, st, servertest.Options{ServerOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(loseCommits)}})
	admin := f.Admin(t, servertest.AdminToken)
	accounts, keys := accountsWithKeys(t, admin, "", 1, 10_000)
	led := ledgerclient.New(f.Ledger(t, servertest.ServiceToken), ledgerclient.Options{})
	var holds []ledger.Reservation
	for i := range 3 {
		r, err := led.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprintf("hold-%d", i), KeyID: keys[0], Amount: 1_000, Pool: ledger.PoolGeneral})
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, r)
	}
	lose.Store(true)
	errs := make([]error, len(holds))
	var wg sync.WaitGroup
	for i, r := range holds {
		wg.Go(func() { _, errs[i] = led.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: 700}) })
	}
	wg.Wait()
	for i, err := range errs {
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("commit %d with its answer lost: %v, want Unavailable", i, err)
		}
	}
	lose.Store(false)
	for i, r := range holds {
		c, err := led.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: 700})
		if err != nil || !c.Replayed || c.Charged != 700 {
			t.Errorf("retried commit %d: %+v, %v; want a replay charging 700", i, c, err)
		}
	}
	a, err := admin.GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: accounts[0]})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.GetAccount().GetBalanceMicros(); got != 10_000-3*700 || a.GetAccount().GetReservedMicros() != 0 {
		t.Errorf("balance %d reserved %d, want %d and nothing held", got, a.GetAccount().GetReservedMicros(), 10_000-3*700)
	}
	if err := tablestest.CheckInvariants(ctx, pool); err != nil {
		t.Fatal(err)
	}
}
