package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	"github.com/llmgw/gateway/e2e/loadtest"
)

func TestMain(m *testing.M) { tablestest.Main(m) }

// BenchmarkReserveCommit measures reserve+commit pairs through the journal engine,
// without and with the materializer of the derived tables, in one run so that their
// ratios hold on a noisy machine: pairs/s, this process's and PostgreSQL's CPU per pair (pg-µs/pair counts every
// PostgreSQL process of the machine), WAL bytes per pair, records per journal append and
// WAL syncs per append. "spread" is 32 callers over 256 accounts with
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
		for _, eng := range []string{"journal", "journal+tables"} {
			b.Run(load.name+"/"+eng, func(b *testing.B) {
				ctx := context.Background()
				pool := tablestest.NewPool(b, tablestest.NewDB(b), int32(load.callers)+4)
				s, e := enginetest.Start(b, pool, eng == "journal+tables")
				limit := ledger.Micros(1 << 50)
				keys := tablestest.BenchKeys(b, s, load.accounts, &limit)
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
				appends0, records0, _ := e.Stats()
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
					enginetest.WaitMaterialized(b, pool, e)
				}
				cpu.Report(b.ReportMetric, b.N, "pair")
				b.ReportMetric(float64(walLSN(b, pool)-wal0)/float64(b.N), "wal-B/pair")
				appends1, records1, _ := e.Stats()
				if n := appends1 - appends0; n > 0 {
					b.ReportMetric(float64(records1-records0)/float64(n), "records/append")
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

// BenchmarkReserveCommitProjects measures reserve+commit pairs through the journal
// engine (its derived tables off) for keys in no project ("none") and for keys three
// projects deep ("3-deep": every project on the path with a daily, monthly and lifetime
// limit, an rpm and a tpm, the key with its own rpm and tpm), one run for both so their
// ratio holds on a noisy machine: 32 callers over 256 accounts, each request with a
// token bound of 300 of which 300 are used.
func BenchmarkReserveCommitProjects(b *testing.B) {
	for _, deep := range []bool{false, true} {
		name := map[bool]string{false: "none", true: "3-deep"}[deep]
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			const callers = 32
			pool := tablestest.NewPool(b, tablestest.NewDB(b), callers+4)
			s, _ := enginetest.Start(b, pool, false)
			keys := benchProjectKeys(b, s, 256, deep)
			var seq atomic.Int64
			pair := func() bool {
				i := seq.Add(1)
				r, err := s.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprintf("bench-%d", i),
					KeyID: keys[int(i)%len(keys)], Model: "demo-chat", Amount: 2_000, Pool: ledger.PoolGeneral, Tokens: 300})
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
			b.ResetTimer()
			b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() && pair() {
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
		})
	}
}

// benchProjectKeys makes n accounts with ample credits and one key each, on
// tablestest.BulkTier; with deep, each key is in the third level of a chain of projects
// with every limit set, none of which the benchmark reaches.
func benchProjectKeys(b *testing.B, s ledger.Store, n int, deep bool) []string {
	b.Helper()
	ctx := context.Background()
	if _, err := s.PutTier(ctx, tablestest.BulkTier); err != nil {
		b.Fatal(err)
	}
	money, rate := ledger.Micros(1<<50), int64(1<<30)
	keys := make([]string, n)
	for i := range keys {
		a, err := s.CreateAccount(ctx, ledger.NewAccount{Tier: tablestest.BulkTier.Name})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.TopUp(ctx, a.ID, money, ""); err != nil {
			b.Fatal(err)
		}
		nk := ledger.NewKey{AccountID: a.ID, DailyLimit: &money, MonthlyLimit: &money}
		nk.Hash = fmt.Appendf(nil, "%032d", i)
		if deep {
			parent := ""
			for level := range 3 {
				p, err := s.CreateProject(ctx, ledger.NewProject{AccountID: a.ID, ParentID: parent,
					Name: fmt.Sprintf("level-%d", level+1), DailyLimit: &money, MonthlyLimit: &money, Limit: &money,
					RPM: &rate, TPM: &rate})
				if err != nil {
					b.Fatal(err)
				}
				parent = p.ID
			}
			nk.ProjectID, nk.RPM, nk.TPM = parent, &rate, &rate
		}
		k, err := s.CreateKey(ctx, nk)
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k.ID
	}
	return keys
}
