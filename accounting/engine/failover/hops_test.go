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
	ctx := context.Background()
	opts := ledgerclient.DialOptions(false)
	conn, err := client.Dial(ctx, c.procs[0].addr+","+c.procs[1].addr, serviceToken, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	led := ledgerclient.New(accountingv1.NewLedgerServiceClient(conn), ledgerclient.Options{
		Dial: func(addr string) (*grpc.ClientConn, error) { return client.Dial(ctx, addr, serviceToken, opts...) }})
	defer led.Close()

	pairs := func(prefix string, n int) {
		t.Helper()
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
	pairs("warm", 16)
	standbyBefore, ownerBefore := ledgerCalls(t, standby), ledgerCalls(t, owner)
	hopsBefore := secondHops(t, standby)
	const n = 400
	pairs("steady", n)
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
