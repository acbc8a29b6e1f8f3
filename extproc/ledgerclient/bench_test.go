package ledgerclient_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	"github.com/llmgw/gateway/e2e/loadtest"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// BenchmarkLedgerPairs measures reserve+commit pairs per second through this client,
// over real gRPC on loopback into accounting on PostgreSQL (256 accounts, 32 callers on
// one connection, as one extproc replica would call it), every operation a call of its
// own. go-µs/pair is the CPU time of this process (callers, gRPC on both ends,
// accounting and its store) per pair, pg-µs/pair that of every PostgreSQL process of
// the machine.
func BenchmarkLedgerPairs(b *testing.B) {
	ctx := context.Background()
	// The ledger accounting runs by default: the journal engine and its tables.
	pool := tablestest.NewPool(b, tablestest.NewDB(b), 16)
	st, e := enginetest.Start(b, pool, true)
	f := servertest.Start(b, st, servertest.Options{})
	_, keys := accountsWithKeys(b, f.Admin(b, servertest.AdminToken), wideTier, 256, 1<<50)
	conn, err := client.Dial(ctx, f.Addr, servertest.ServiceToken)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	led := ledgerclient.New(accountingv1.NewLedgerServiceClient(conn), ledgerclient.Options{})

	var seq atomic.Int64
	b.SetParallelism(16) // × GOMAXPROCS callers
	cpu := loadtest.StartCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			r, err := led.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprintf("bench-%d", i),
				KeyID: keys[int(i)%len(keys)], Model: "demo-chat", Amount: 2_000, Pool: ledger.PoolGeneral})
			if err != nil {
				b.Errorf("Reserve: %v", err)
				return
			}
			if _, err := led.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: 1_500,
				Usage: ledger.Usage{InputTokens: 100, OutputTokens: 200}, UpstreamModel: "up", Channel: "c"}); err != nil {
				b.Errorf("Commit: %v", err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	cpu.Report(b.ReportMetric, b.N, "pair")
	enginetest.WaitMaterialized(b, pool, e)
	if err := tablestest.CheckInvariants(ctx, pool); err != nil {
		b.Fatal(err)
	}
}
