package failover_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

const (
	// callTimeout bounds one attempt of a call: an attempt at a paused process is given
	// up after it and made again at the next process.
	callTimeout = 500 * time.Millisecond
	// retryFor bounds all the attempts of one call.
	retryFor = 30 * time.Second
	// tierName is a tier without practical limits, so that the load is never refused.
	tierName = "failover"
)

// cluster is accounting processes on one database, and connections to each of them.
type cluster struct {
	t     testing.TB
	db    string
	pool  *pgxpool.Pool
	procs []*proc
	led   []accountingv1.LedgerServiceClient
	adm   []accountingv1.AdminServiceClient
}

// newCluster starts n processes on a fresh database: the first one owns the ledger
// before the others start.
func newCluster(t testing.TB, n int) *cluster {
	t.Helper()
	db := tablestest.NewDB(t)
	c := &cluster{t: t, db: db, pool: tablestest.NewPool(t, db, 4)}
	for i := range n {
		p := newProc(t, fmt.Sprintf("p%d", i), db)
		c.procs = append(c.procs, p)
		c.led = append(c.led, accountingv1.NewLedgerServiceClient(dial(t, p.addr, serviceToken)))
		c.adm = append(c.adm, accountingv1.NewAdminServiceClient(dial(t, p.addr, adminToken)))
		if i == 0 {
			c.waitOwner(p, 10*time.Second)
		}
	}
	return c
}

func dial(t testing.TB, addr, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := client.Dial(context.Background(), addr, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// lease is the shard's owner row: its epoch and address.
type ownerRow struct {
	Epoch int64
	Addr  string
	Live  bool
}

func (c *cluster) owner(ctx context.Context) (ownerRow, error) {
	var o ownerRow
	err := c.pool.QueryRow(ctx, `SELECT epoch, addr, lease_until > clock_timestamp() FROM ledger_owner WHERE shard = 0`).
		Scan(&o.Epoch, &o.Addr, &o.Live)
	if errors.Is(err, pgx.ErrNoRows) {
		return ownerRow{}, nil
	}
	return o, err
}

// waitOwner waits until p holds a live lease and answers as the owner.
func (c *cluster) waitOwner(p *proc, within time.Duration) ownerRow {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		o, err := c.owner(context.Background())
		if err != nil {
			c.t.Fatal(err)
		}
		if o.Live && o.Addr == p.addr {
			return o
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%v does not own the ledger after %v (owner row %+v):\n%s", p, within, o, tail(p.logs.String(), 20))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ownerProc is the process that holds the live lease.
func (c *cluster) ownerProc() (*proc, ownerRow) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		o, err := c.owner(context.Background())
		if err != nil {
			c.t.Fatal(err)
		}
		for _, p := range c.procs {
			if o.Live && o.Addr == p.addr {
				return p, o
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no live owner among the processes: %+v", o)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *cluster) index(p *proc) int {
	for i, q := range c.procs {
		if q == p {
			return i
		}
	}
	c.t.Fatalf("%v is not in the cluster", p)
	return -1
}

// retryable reports whether a call's error leaves its outcome to a retry with the same
// ids: the ledger was unavailable (no owner, an owner that stopped, a process that is
// gone) or the attempt timed out (a paused process).
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// retry calls fn against the processes, starting at start and moving to the next one
// after every attempt that failed retryably, until an attempt answers or retryFor
// passed. It returns the answer's error and how many attempts failed before.
func retry(ctx context.Context, n, start int, fn func(ctx context.Context, i int) error) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, retryFor)
	defer cancel()
	for failed := 0; ; failed++ {
		actx, acancel := context.WithTimeout(ctx, callTimeout)
		err := fn(actx, (start+failed)%n)
		acancel()
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return failed, err
		}
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
	}
}

// setupAccounts makes the tier without limits, n accounts in it topped up with topUp,
// and a key for each, through the owner (no retries: nothing fails over meanwhile).
func (c *cluster) setupAccounts(n int, topUp int64) []account {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner, _ := c.ownerProc()
	adm := c.adm[c.index(owner)]
	if _, err := adm.SetTier(ctx, &accountingv1.SetTierRequest{Tier: &accountingv1.Tier{Name: tierName,
		RpmBeforeTopup: ledger.MaxTierLimit, RpmAfterTopup: ledger.MaxTierLimit,
		InFlightGeneral: ledger.MaxTierLimit, InFlightHighCost: ledger.MaxTierLimit}}); err != nil {
		c.t.Fatal(err)
	}
	accts := make([]account, n)
	for i := range accts {
		a, err := adm.CreateAccount(ctx, &accountingv1.CreateAccountRequest{Tier: tierName})
		if err != nil {
			c.t.Fatal(err)
		}
		id := a.GetAccount().GetId()
		if _, err := adm.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: id, AmountMicros: topUp, IdempotencyKey: "setup-" + id}); err != nil {
			c.t.Fatal(err)
		}
		k, err := adm.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: id, Name: "load"})
		if err != nil {
			c.t.Fatal(err)
		}
		accts[i] = account{id: id, keyID: k.GetKey().GetId(), topUp: topUp}
	}
	return accts
}
