package store_test

import (
	"context"
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
// as under moderate load; "serial" has one, each pair made after the last has
// returned: every batch is one operation, what a request costs the ledger at low load
// (the floor of its CPU there). "hot" puts every pair on a single account; "alone" runs
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
		{"spread/serial", 256, false, 1},
		{"hot", 1, false, 32},
		{"hot/alone", 1, true, 32},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			url := storetest.NewDB(b)
			pool := storetest.NewPool(b, url, int32(bc.callers))
			s := store.New(pool, store.Options{NoGroupCommit: bc.alone})
			keys := storetest.BenchKeys(b, s, bc.accounts, ptr[ledger.Micros](1<<50))
			var seq atomic.Int64
			b.SetParallelism(max(1, bc.callers/runtime.GOMAXPROCS(0))) // × GOMAXPROCS goroutines
			cpu := loadtest.StartCPU()
			b.ResetTimer()
			pair := func() bool {
				i := seq.Add(1)
				r, err := s.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprintf("bench-%d", i),
					KeyID: keys[int(i)%len(keys)], Model: "demo-chat", Amount: 2_000, Pool: ledger.PoolGeneral})
				if err != nil {
					b.Errorf("Reserve: %v", err)
					return false
				}
				if _, err := s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: 1_500,
					Usage: ledger.Usage{InputTokens: 100, OutputTokens: 200}, UpstreamModel: "up", Channel: "c"}); err != nil {
					b.Errorf("Commit: %v", err)
					return false
				}
				return true
			}
			if bc.callers == 1 {
				for i := 0; i < b.N && pair(); i++ {
				}
			} else {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() && pair() {
					}
				})
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			cpu.Report(b.ReportMetric, b.N, "pair")
			if err := storetest.CheckInvariants(ctx, pool); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkReplicas measures reserve+commit pairs per second on two busy accounts from 12
// callers, through one Store ("one") or spread over two Stores on the same database
// ("two"), as accounting replicas behind extproc's round robin are: their writers lock
// the same two account rows. alone/pair counts the operations a failed or deferred batch
// sent back to run alone.
func BenchmarkReplicas(b *testing.B) {
	for _, replicas := range []int{1, 2} {
		b.Run(map[int]string{1: "one", 2: "two"}[replicas], func(b *testing.B) {
			ctx := context.Background()
			url := storetest.NewDB(b)
			var stores []*store.Store
			pool := storetest.NewPool(b, url, 8)
			for i := range replicas {
				if i > 0 {
					pool = storetest.NewPool(b, url, 8)
				}
				stores = append(stores, store.New(pool, store.Options{}))
			}
			keys := storetest.BenchKeys(b, stores[0], 2, nil)
			var seq atomic.Int64
			b.SetParallelism(max(1, 12/runtime.GOMAXPROCS(0)))
			cpu := loadtest.StartCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1)
					st := stores[int(i)%len(stores)]
					r, err := st.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprintf("replicas-%d", i),
						KeyID: keys[int(i/2)%len(keys)], Model: "demo-chat", Amount: 2_000, Pool: ledger.PoolGeneral})
					if err != nil {
						b.Errorf("Reserve: %v", err)
						return
					}
					if _, err := st.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: 1_500,
						Usage: ledger.Usage{InputTokens: 100, OutputTokens: 200}}); err != nil {
						b.Errorf("Commit: %v", err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			cpu.Report(b.ReportMetric, b.N, "pair")
			var alone int64
			for _, st := range stores {
				alone += st.GroupStats().Alone
			}
			b.ReportMetric(float64(alone)/float64(b.N), "alone/pair")
			if err := storetest.CheckInvariants(ctx, pool); err != nil {
				b.Fatal(err)
			}
		})
	}
}
