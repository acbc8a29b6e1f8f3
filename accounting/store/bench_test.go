package store_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
	"github.com/llmgw/gateway/e2e/loadtest"
)

// BenchmarkReserveCommit measures reserve+commit pairs per second through the Store
// (two round trips and two transactions per pair) from many goroutines at once, each
// pair on one of `accounts` accounts with a limited key (so the spend windows are
// maintained and checked too). "few" has 4 callers instead of 32, so batches stay small,
// as under moderate load. "hot" puts every pair on a single account; "alone" runs
// each operation in its own transaction (Options.NoGroupCommit), for the ratio in one run.
// go-µs/pair is the CPU time of this process (callers, the store, pgx) per pair, pg-µs/pair
// that of every PostgreSQL process of the machine.
func BenchmarkReserveCommit(b *testing.B) {
	for _, bc := range []struct {
		name     string
		accounts int
		alone    bool
		callers  int
	}{
		{"spread", 256, false, 32},
		{"spread/alone", 256, true, 32},
		{"spread/few", 256, false, 4},
		{"hot", 1, false, 32},
		{"hot/alone", 1, true, 32},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			url := storetest.NewDB(b)
			pool := storetest.NewPool(b, url, int32(bc.callers))
			s := store.New(pool, store.Options{NoGroupCommit: bc.alone})
			if _, err := s.PutTier(ctx, bulkTier); err != nil {
				b.Fatal(err)
			}
			keys := make([]string, bc.accounts)
			for i := range keys {
				a, err := s.CreateAccount(ctx, bulkTier.Name)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.TopUp(ctx, a.ID, 1<<50, ""); err != nil {
					b.Fatal(err)
				}
				h := sha256.Sum256(fmt.Appendf(nil, "bench-%d", i))
				k, err := s.CreateKey(ctx, ledger.NewKey{AccountID: a.ID, Hash: h[:],
					DailyLimit: ptr[ledger.Micros](1 << 50), MonthlyLimit: ptr[ledger.Micros](1 << 50)})
				if err != nil {
					b.Fatal(err)
				}
				keys[i] = k.ID
			}
			var seq atomic.Int64
			b.SetParallelism(max(1, bc.callers/runtime.GOMAXPROCS(0))) // × GOMAXPROCS goroutines
			cpu := loadtest.StartCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1)
					r, err := s.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprintf("bench-%d", i),
						KeyID: keys[int(i)%len(keys)], Model: "demo-chat", Amount: 2_000, Pool: ledger.PoolGeneral})
					if err != nil {
						b.Errorf("Reserve: %v", err)
						return
					}
					if _, err := s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: 1_500,
						Usage: ledger.Usage{InputTokens: 100, OutputTokens: 200}, UpstreamModel: "up", Channel: "c"}); err != nil {
						b.Errorf("Commit: %v", err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			cpu.Report(b.ReportMetric, b.N, "pair")
			if err := storetest.CheckInvariants(ctx, pool); err != nil {
				b.Fatal(err)
			}
		})
	}
}
