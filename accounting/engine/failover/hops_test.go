package failover_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// With two replicas at steady state, extproc's ledger client (dialled to both, round
// robin, as over a headless Service) calls the owner directly: once its first calls
// taught it the owner, no call reaches the standby (none forwarded, none redirected)
// and the owner answers them all.
func TestSteadyStateCallsTakeOneHop(t *testing.T) {
	c := newCluster(t, 2)
	accts := c.setupAccounts(4, 1<<40)
	owner, _ := c.ownerProc()
	standby := c.procs[1-c.index(owner)]
	if !waitFor(10*time.Second, standby.ready) {
		t.Fatalf("%v never knew the owner", standby)
	}
	led := extprocClient(t, c)
	pairs(t, led, accts, "warm", 16)
	standbyBefore, ownerBefore := ledgerCalls(t, standby), ledgerCalls(t, owner)
	hopsBefore := secondHops(t, standby)
	const n = 400
	pairs(t, led, accts, "steady", n)
	standbyCalls, ownerCalls := ledgerCalls(t, standby)-standbyBefore, ledgerCalls(t, owner)-ownerBefore
	hops := secondHops(t, standby) - hopsBefore
	t.Logf("steady state: %d calls at the owner, %d at the standby, %d took a second hop", ownerCalls, standbyCalls, hops)
	if hops != 0 || standbyCalls != 0 {
		t.Errorf("%d calls reached the standby, %d of them forwarded or redirected; want none", standbyCalls, hops)
	}
	if ownerCalls != 2*n {
		t.Errorf("the owner answered %d calls, want %d", ownerCalls, 2*n)
	}
}

// The owner killed, extproc's ledger client finds the new owner within the takeover
// (its calls fail meanwhile, and a retry with the same request id is answered once the
// standby took over) and calls it directly from then on.
func TestClientFollowsTheTakeover(t *testing.T) {
	c := newCluster(t, 2)
	accts := c.setupAccounts(2, 1<<40)
	led := extprocClient(t, c)
	pairs(t, led, accts, "before", 16)
	old, _ := c.ownerProc()
	old.kill()
	start := time.Now()
	ctx := context.Background()
	for {
		actx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := led.Reserve(actx, ledger.ReserveRequest{RequestID: "across", KeyID: accts[0].keyID, Amount: holdMicros, Pool: ledger.PoolGeneral})
		cancel()
		if err == nil {
			break
		}
		if !retryable(err) || time.Since(start) > 15*time.Second {
			t.Fatalf("reserve %v after the owner's death: %v", time.Since(start), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the client's first call answered %v after the owner's death (lease %v)", time.Since(start).Round(time.Millisecond), lease)
	owner, _ := c.ownerProc()
	before, hopsBefore := ledgerCalls(t, owner), secondHops(t, owner)
	const n = 100
	pairs(t, led, accts, "after", n)
	if calls, hops := ledgerCalls(t, owner)-before, secondHops(t, owner)-hopsBefore; calls != 2*n || hops != 0 {
		t.Errorf("the new owner answered %d calls (%d a second hop), want %d directly", calls, hops, 2*n)
	}
}

// extprocClient is extproc's ledger client as extproc makes it: dialled to every process
// of c as a list, round robin, following redirects to the owner.
func extprocClient(t testing.TB, c *cluster) *ledgerclient.Client {
	t.Helper()
	ctx := context.Background()
	opts := ledgerclient.DialOptions(false)
	var addrs []string
	for _, p := range c.procs {
		addrs = append(addrs, p.addr)
	}
	conn, err := client.Dial(ctx, strings.Join(addrs, ","), serviceToken, opts...)
	if err != nil {
		t.Fatal(err)
	}
	led := ledgerclient.New(accountingv1.NewLedgerServiceClient(conn), ledgerclient.Options{
		Dial: func(addr string) (*grpc.ClientConn, error) { return client.Dial(ctx, addr, serviceToken, opts...) }})
	t.Cleanup(func() { led.Close(); _ = conn.Close() })
	return led
}

// pairs makes n reserve+commit pairs through led on accts, 8 at a time; any error fails
// the test.
func pairs(t testing.TB, led *ledgerclient.Client, accts []account, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				a := accts[i%len(accts)]
				r, err := led.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprintf("%s-%d", prefix, i), KeyID: a.keyID,
					Amount: holdMicros, Pool: ledger.PoolGeneral})
				if err != nil {
					t.Errorf("reserve: %v", err)
					return
				}
				if _, err := led.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: holdMicros / 2}); err != nil {
					t.Errorf("commit: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// ledgerCalls is how many Reserve and Commit calls p answered, whatever their answer.
func ledgerCalls(t testing.TB, p *proc) int64 {
	return p.metric(t, "accounting_grpc_request_duration_seconds_count", `method="Reserve"`) +
		p.metric(t, "accounting_grpc_request_duration_seconds_count", `method="Commit"`)
}

// secondHops is how many calls p forwarded to the owner or answered with its address.
func secondHops(t testing.TB, p *proc) int64 {
	return p.metric(t, "accounting_forwarded_calls_total", "") + p.metric(t, "accounting_redirected_calls_total", "")
}

// metric is the sum of the samples of name on p's /metrics whose labels contain label.
func (p *proc) metric(t testing.TB, name, label string) int64 {
	t.Helper()
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + p.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum int64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		metric, value, ok := strings.Cut(line, " ")
		if !ok || !(metric == name || strings.HasPrefix(metric, name+"{")) || !strings.Contains(metric, label) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", p, line, err)
		}
		sum += int64(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}
