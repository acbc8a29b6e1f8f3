package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestALeaseThatRanOutWhileAccountingWasDownIsKept: a hold whose lease ran out while
// accounting was down is not expired by the sweeper of the accounting that starts
// again: its owner, alive all along, commits it once it reaches accounting, and the
// answer it delivered is charged.
func TestALeaseThatRanOutWhileAccountingWasDownIsKept(t *testing.T) {
	db := tablestest.NewDB(t)
	p := start(t, db, "--sweep-interval", "100ms")
	id := runCtl(t, p.addr, "account", "create")["id"].(string)
	runCtl(t, p.addr, "account", "topup", id, "--amount", "1")
	keyID := runCtl(t, p.addr, "key", "create", "--account", id)["id"].(string)
	ctx := context.Background()
	led := ledgerClient(t, p.addr)
	res, err := led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: "req-grace", KeyId: keyID,
		AmountMicros: 100, Pool: accountingv1.Pool_POOL_GENERAL, TtlSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("accounting exited with %d", code)
	}
	time.Sleep(1500 * time.Millisecond) // the lease runs out while accounting is down

	p = start(t, db, "--sweep-interval", "100ms")
	time.Sleep(time.Second) // ten sweeps
	c, err := ledgerClient(t, p.addr).Commit(ctx, &accountingv1.CommitRequest{ReservationId: res.GetReservationId(), ActualMicros: 40})
	if err != nil || c.GetChargedMicros() != 40 || c.GetReplayed() {
		t.Fatalf("commit after accounting came back = %v, %v; want 40 charged", c, err)
	}
	if a := runCtl(t, p.addr, "account", "show", id); num(t, a, "balance_micros") != "999960" || num(t, a, "reserved_micros") != "0" {
		t.Errorf("account after the commit: %v", a)
	}
}

func ledgerClient(t *testing.T, addr string) accountingv1.LedgerServiceClient {
	t.Helper()
	conn, err := client.Dial(context.Background(), addr, serviceToken)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return accountingv1.NewLedgerServiceClient(conn)
}
