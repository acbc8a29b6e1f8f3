package app_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	"github.com/llmgw/gateway/e2e/loadtest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// benchTier has limits high enough that only the ledger's own cost is measured.
var benchTier = ledger.Tier{Name: "bench", RPMBeforeTopUp: 1 << 30, RPMAfterTopUp: 1 << 30,
	InFlightGeneral: 1 << 20, InFlightHighCost: 1 << 20}

// BenchmarkGRPCReserveCommit measures reserve+commit pairs per second through real gRPC
// on loopback into the real service (Main) on a fresh database, from many goroutines
// over a few client connections, as extproc replicas would call it. "spread" uses 256
// accounts, "hot" one. go-µs/pair is the CPU time of this process (callers, gRPC on
// both ends, the service and its store) per pair, pg-µs/pair that of every PostgreSQL
// process of the machine.
func BenchmarkGRPCReserveCommit(b *testing.B) {
	for _, bc := range []struct {
		name     string
		accounts int
	}{{"spread", 256}, {"hot", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			url := tablestest.NewDB(b)
			p := start(b, url+"&pool_max_conns=16")

			adminConn, err := client.Dial(ctx, p.addr, adminToken)
			if err != nil {
				b.Fatal(err)
			}
			defer adminConn.Close()
			admin := accountingv1.NewAdminServiceClient(adminConn)
			if _, err := admin.SetTier(ctx, &accountingv1.SetTierRequest{Tier: contract.TierToProto(benchTier)}); err != nil {
				b.Fatal(err)
			}
			keys := make([]string, bc.accounts)
			limit := int64(1 << 50)
			for i := range keys {
				a, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{Tier: benchTier.Name})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: a.GetAccount().GetId(), AmountMicros: 1 << 50}); err != nil {
					b.Fatal(err)
				}
				k, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: a.GetAccount().GetId(),
					DailyLimitMicros: &limit, MonthlyLimitMicros: &limit})
				if err != nil {
					b.Fatal(err)
				}
				keys[i] = k.GetKey().GetId()
			}

			const conns = 4
			clients := make([]accountingv1.LedgerServiceClient, conns)
			for i := range clients {
				cc, err := client.Dial(ctx, p.addr, serviceToken)
				if err != nil {
					b.Fatal(err)
				}
				defer cc.Close()
				clients[i] = accountingv1.NewLedgerServiceClient(cc)
			}
			var seq, worker atomic.Int64
			b.SetParallelism(16) // × GOMAXPROCS goroutines
			cpu := loadtest.StartCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				led := clients[int(worker.Add(1))%conns]
				for pb.Next() {
					i := seq.Add(1)
					r, err := led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: fmt.Sprintf("bench-%d", i),
						KeyId: keys[int(i)%len(keys)], Model: "demo-chat", AmountMicros: 2_000, Pool: accountingv1.Pool_POOL_GENERAL})
					if err != nil {
						b.Errorf("Reserve: %v", err)
						return
					}
					if _, err := led.Commit(ctx, &accountingv1.CommitRequest{ReservationId: r.GetReservationId(), ActualMicros: 1_500,
						Usage: &accountingv1.Usage{InputTokens: 100, OutputTokens: 200}, UpstreamModel: "up", Channel: "c"}); err != nil {
						b.Errorf("Commit: %v", err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			cpu.Report(b.ReportMetric, b.N, "pair")
			pool := tablestest.NewPool(b, url, 2)
			if err := tablestest.CheckInvariants(ctx, pool); err != nil {
				b.Fatal(err)
			}
		})
	}
}
