package failover_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	"github.com/llmgw/gateway/extproc/lifecycle"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// clientLoad is extproc's admission and settlement against two replicas, through the
// ledger client extproc uses: a reserve within the admission's budget (an error is a
// client's error), then its commit, retried until it lands (as the settlement is).
type clientLoad struct {
	led     *ledgerclient.Client
	acct    account
	stop    chan struct{}
	wg      sync.WaitGroup
	n, held atomic.Int64
	mu      sync.Mutex
	errs    []time.Time // when each failed reserve was made
	why     []string    // and how it failed
	start   time.Time
}

const holdAmount = 1000

func startClientLoad(t *testing.T, c *cluster, acct account, workers int, every time.Duration) *clientLoad {
	var addrs []string
	for _, p := range c.procs {
		addrs = append(addrs, p.addr)
	}
	conn, err := client.Dial(context.Background(), strings.Join(addrs, ","), serviceToken, ledgerclient.DialOptions(false)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	l := &clientLoad{led: ledgerclient.New(accountingv1.NewLedgerServiceClient(conn), ledgerclient.Options{}), acct: acct, stop: make(chan struct{}), start: time.Now()}
	for w := range workers {
		l.wg.Go(func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				l.pair(t, fmt.Sprintf("w%d-%d", w, i))
			}
		})
	}
	return l
}

func (l *clientLoad) pair(t *testing.T, id string) {
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), lifecycle.AdmitBudget)
	res, err := l.led.Reserve(ctx, ledger.ReserveRequest{RequestID: id, KeyID: l.acct.keyID, Amount: holdAmount, Pool: ledger.PoolGeneral, TTL: time.Hour})
	cancel()
	l.n.Add(1)
	if err != nil {
		l.mu.Lock()
		l.errs = append(l.errs, started)
		l.why = append(l.why, fmt.Sprintf("%v after the start, %v: %v", started.Sub(l.start).Round(time.Millisecond), time.Since(started).Round(time.Millisecond), err))
		l.mu.Unlock()
		return
	}
	l.held.Add(1)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = l.led.Commit(ctx, ledger.CommitRequest{ReservationID: res.ID, Actual: 1})
		cancel()
		if err == nil {
			return
		}
	}
	t.Errorf("commit of %s never landed: %v", res.ID, err)
}

// errorsIn counts the failed reserves made in [from, to), and returns the last one's
// time.
func (l *clientLoad) errorsIn(from, to time.Time) (n int, last time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		if !e.Before(from) && e.Before(to) {
			n++
			last = e
		}
	}
	return n, last
}

// TestClientsThroughOwnerFailover: two replicas with the default settings, under the
// load of extproc's ledger client (about 150 reserves a second, each within the
// admission's budget). A kill -9 of the owner costs the clients no error, and a standby
// owns the ledger within 2 s; a pause (SIGSTOP) of either replica costs errors only
// until the client stops using it, a few seconds at most; no hold is left that nobody
// was answered for; and every replica is ready afterwards.
func TestClientsThroughOwnerFailover(t *testing.T) {
	db := tablestest.NewDB(t)
	c := &cluster{t: t, db: db, pool: tablestest.NewPool(t, db, 4)}
	for i := range 2 {
		p := &proc{name: fmt.Sprintf("p%d", i), addr: freePort(t), metricsAddr: freePort(t), db: db, defaults: true}
		p.start(t)
		t.Cleanup(p.kill)
		c.procs = append(c.procs, p)
		c.led = append(c.led, accountingv1.NewLedgerServiceClient(dial(t, p.addr, serviceToken)))
		c.adm = append(c.adm, accountingv1.NewAdminServiceClient(dial(t, p.addr, adminToken)))
		if i == 0 {
			c.waitOwner(p, 10*time.Second)
		}
	}
	acct := c.setupAccounts(1, 1_000_000_000_000)[0]
	bothReady := func(what string) {
		t.Helper()
		if !waitFor(15*time.Second, func() bool { return c.procs[0].ready() && c.procs[1].ready() }) {
			t.Fatalf("after %s: ready %v %v", what, c.procs[0].ready(), c.procs[1].ready())
		}
	}
	bothReady("the start")
	l := startClientLoad(t, c, acct, 8, 50*time.Millisecond)
	time.Sleep(2 * time.Second)

	// kill -9 of the owner.
	owner, _ := c.ownerProc()
	killed := time.Now()
	if err := owner.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took := takeover(t, c, owner, acct.id)
	owner.wait(t, 5*time.Second)
	time.Sleep(2 * time.Second)
	n, _ := l.errorsIn(killed, time.Now())
	t.Logf("kill -9 of the owner %v after the start: a standby answered after %v; %d reserves failed", killed.Sub(l.start).Round(time.Millisecond), took, n)
	if n != 0 {
		t.Errorf("kill -9 of the owner: %d reserves failed, want none", n)
	}
	if took > 2*time.Second*3 { // generous: the machine is shared
		t.Errorf("takeover took %v with the default lease (want about 1 s)", took)
	}
	owner.start(t)
	bothReady("the kill")

	// SIGSTOP of each replica in turn (the owner first), for 6 s.
	for _, which := range []string{"owner", "standby"} {
		time.Sleep(2 * time.Second)
		p, _ := c.ownerProc()
		if which == "standby" {
			p = c.procs[1-c.index(p)]
		}
		stopped := time.Now()
		if err := p.signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(6 * time.Second)
		resumed := time.Now()
		if err := p.signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		n, last := l.errorsIn(stopped, resumed)
		errFor := time.Duration(0)
		if n > 0 {
			errFor = last.Sub(stopped)
		}
		t.Logf("SIGSTOP of the %s for 6 s from %v after the start: %d reserves failed, the last %v after the stop", which, stopped.Sub(l.start).Round(time.Millisecond), n, errFor.Round(time.Millisecond))
		if errFor > 4*time.Second {
			t.Errorf("SIGSTOP of the %s: reserves failed until %v after the stop (want the first seconds only)", which, errFor)
		}
		// A fenced owner exits (fail-stop) or rebuilds itself as a standby.
		select {
		case <-p.done:
			p.start(t)
		case <-time.After(3 * time.Second):
		}
		bothReady("SIGSTOP of the " + which)
	}
	close(l.stop)
	l.wg.Wait()

	// Every hold answered was committed: what is still held was made for nobody.
	owner, _ = c.ownerProc()
	var a *accountingv1.GetAccountResponse
	var err error
	if !waitFor(10*time.Second, func() bool {
		a, err = c.adm[c.index(owner)].GetAccount(context.Background(), &accountingv1.GetAccountRequest{AccountId: acct.id})
		return err == nil
	}) {
		t.Fatal(err)
	}
	orphans := a.GetAccount().GetReservedMicros() / holdAmount
	l.mu.Lock()
	failed := len(l.errs)
	l.mu.Unlock()
	t.Logf("%d reserves, %d failed; %d holds left that no client was answered for", l.n.Load(), failed, orphans)
	if orphans > 2 {
		t.Errorf("%d holds left after the pauses that no client was answered for", orphans)
	}
	if len(l.why) > 0 {
		for _, w := range l.why {
			t.Logf("failed reserve: %s", w)
		}
	}
}
