package engine_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/engine"
	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
	"github.com/llmgw/gateway/e2e/loadtest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// BenchmarkReserveCommit measures reserve+commit pairs through today's PostgreSQL store
// and through the journal engine, in one run so that their ratios hold on a noisy
// machine: pairs/s, this process's and PostgreSQL's CPU per pair (pg-µs/pair counts every
// PostgreSQL process of the machine), WAL bytes per pair, and for the engine records per
// journal append and WAL syncs per append. "spread" is 32 callers over 256 accounts with
// limited keys, "hot" 32 callers on one account, "paced" one caller at 100 pairs/s.
func BenchmarkReserveCommit(b *testing.B) {
	for _, load := range []struct {
		name     string
		accounts int
		callers  int
		pace     time.Duration
	}{
		{"spread", 256, 32, 0},
		{"hot", 1, 32, 0},
		{"paced", 256, 1, 10 * time.Millisecond},
	} {
		for _, eng := range []string{"store", "journal", "journal+tables"} {
			b.Run(load.name+"/"+eng, func(b *testing.B) {
				ctx := context.Background()
				pool := storetest.NewPool(b, storetest.NewDB(b), int32(load.callers)+4)
				var s ledger.Store = store.New(pool, store.Options{})
				var e *engine.Engine
				if eng != "store" {
					e = runEngine(b, pool, eng == "journal+tables")
					s = engine.Store{Engine: e, Reports: store.New(pool, store.Options{})}
				}
				keys := benchKeys(b, s, load.accounts)
				var seq atomic.Int64
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
				wal0 := walLSN(b, pool)
				var appends0, records0 int64
				if e != nil {
					appends0, records0, _ = e.Stats()
				}
				cpu := loadtest.StartCPU()
				b.ResetTimer()
				if load.callers == 1 {
					next := time.Now()
					for i := 0; i < b.N && pair(); i++ {
						next = next.Add(load.pace)
						time.Sleep(time.Until(next))
					}
				} else {
					b.SetParallelism(max(1, load.callers/runtime.GOMAXPROCS(0)))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() && pair() {
						}
					})
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
				if eng == "journal+tables" {
					// The derived tables' writes are part of the cost: wait for them.
					waitMaterialized(b, pool, e)
				}
				cpu.Report(b.ReportMetric, b.N, "pair")
				b.ReportMetric(float64(walLSN(b, pool)-wal0)/float64(b.N), "wal-B/pair")
				if e != nil {
					appends1, records1, _ := e.Stats()
					if n := appends1 - appends0; n > 0 {
						b.ReportMetric(float64(records1-records0)/float64(n), "records/append")
					}
				}
			})
		}
	}
}

// walLSN is the WAL insert position. Each journal append is one transaction, so at
// most one WAL flush: the journal's BenchmarkAppend counts them.
func walLSN(b *testing.B, pool *pgxpool.Pool) (lsn int64) {
	b.Helper()
	err := pool.QueryRow(context.Background(),
		`SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&lsn)
	if err != nil {
		b.Fatal(err)
	}
	return lsn
}

// waitMaterialized waits until the derived tables hold every journal record.
func waitMaterialized(b *testing.B, pool *pgxpool.Pool, e *engine.Engine) {
	b.Helper()
	for t0 := time.Now(); time.Since(t0) < time.Minute; time.Sleep(5 * time.Millisecond) {
		var seq int64
		if err := pool.QueryRow(context.Background(), `SELECT coalesce(max(seq), 0) FROM ledger_materialized`).Scan(&seq); err != nil {
			b.Fatal(err)
		}
		if seq >= e.Durable() {
			return
		}
	}
	b.Fatal("the derived tables did not catch up within a minute")
}

// runEngine runs a journal engine on pool until the benchmark ends, with the
// materializer of the derived tables when tables is set, and waits until it owns the
// ledger.
func runEngine(b *testing.B, pool *pgxpool.Pool, tables bool) *engine.Engine {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	j := journal.New(pool, 0)
	e := engine.New(j, engine.Options{})
	done := make(chan error, 2)
	go func() { done <- e.Run(ctx) }()
	if tables {
		go func() {
			for !e.Owning() && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			done <- e.Materialize(ctx, j, pool, 0, zap.NewNop())
		}()
	}
	b.Cleanup(func() {
		cancel()
		<-done
		if tables {
			<-done
		}
	})
	for t0 := time.Now(); !e.Owning(); time.Sleep(5 * time.Millisecond) {
		if time.Since(t0) > 10*time.Second {
			b.Fatalf("the engine does not own the ledger: %v", e.Err())
		}
	}
	return e
}

var bulkTier = ledger.Tier{Name: "bulk", RPMBeforeTopUp: 1_000_000, RPMAfterTopUp: 1_000_000,
	InFlightGeneral: 1_000_000, InFlightHighCost: 1_000_000}

// benchKeys makes n accounts on bulkTier with ample credits and one key each, with
// daily and monthly limits (so the spend windows are kept and checked), and returns
// the keys.
func benchKeys(b *testing.B, s ledger.Store, n int) []string {
	b.Helper()
	ctx := context.Background()
	if _, err := s.PutTier(ctx, bulkTier); err != nil {
		b.Fatal(err)
	}
	limit := ledger.Micros(1 << 50)
	keys := make([]string, n)
	for i := range keys {
		a, err := s.CreateAccount(ctx, bulkTier.Name)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.TopUp(ctx, a.ID, 1<<50, ""); err != nil {
			b.Fatal(err)
		}
		h := sha256.Sum256(fmt.Appendf(nil, "bench-%d", i))
		k, err := s.CreateKey(ctx, ledger.NewKey{AccountID: a.ID, Hash: h[:], DailyLimit: &limit, MonthlyLimit: &limit})
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k.ID
	}
	return keys
}
