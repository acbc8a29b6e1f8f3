// Package enginetest runs the journal engine — the ledger the accounting service runs
// by default — on a test's database, for the tests and benchmarks of its callers. Only
// tests import it.
package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/engine"
	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/tables"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// Start runs an engine on pool (a migrated database, tablestest.NewPool) until tb ends,
// with the materializer of the derived tables when withTables is set, and returns it once
// it owns the ledger, with the ledger.Store the gRPC server would serve.
func Start(tb testing.TB, pool *pgxpool.Pool, withTables bool) (engine.Store, *engine.Engine) {
	tb.Helper()
	return start(tb, pool, withTables, nil)
}

// StartAt is Start with the derived tables, deciding and reporting at the time now
// tells (a test's settable clock).
func StartAt(tb testing.TB, pool *pgxpool.Pool, now func() time.Time) (engine.Store, *engine.Engine) {
	tb.Helper()
	return start(tb, pool, true, now)
}

// NewLedger runs the journal engine with its derived tables on a fresh database of its
// own (tablestest.NewDB), through a pool of at most maxConns connections: the ledger a
// test of its callers serves. It returns the ledger.Store the gRPC server would serve,
// and the pool for direct inspection (tablestest.CheckInvariants).
func NewLedger(tb testing.TB, maxConns int32) (engine.Store, *pgxpool.Pool) {
	tb.Helper()
	pool := tablestest.NewPool(tb, tablestest.NewDB(tb), maxConns)
	s, _ := Start(tb, pool, true)
	return s, pool
}

func start(tb testing.TB, pool *pgxpool.Pool, withTables bool, now func() time.Time) (engine.Store, *engine.Engine) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	j := journal.New(pool, 0)
	e := engine.New(j, engine.Options{Now: now})
	done := make(chan error, 2)
	go func() { done <- e.Run(ctx) }()
	if withTables {
		go func() {
			for !e.Owning() && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			done <- e.Materialize(ctx, j, pool, 0, zap.NewNop())
		}()
	}
	tb.Cleanup(func() {
		cancel()
		<-done
		if withTables {
			<-done
		}
	})
	for t0 := time.Now(); !e.Owning(); time.Sleep(5 * time.Millisecond) {
		if time.Since(t0) > 10*time.Second {
			tb.Fatalf("the engine does not own the ledger: %v", e.Err())
		}
	}
	return engine.Store{Engine: e, Reports: tables.New(pool, tables.Options{Now: now})}, e
}

// WaitMaterialized waits until the derived tables hold every record e made durable.
func WaitMaterialized(tb testing.TB, pool *pgxpool.Pool, e *engine.Engine) {
	tb.Helper()
	for t0 := time.Now(); time.Since(t0) < time.Minute; time.Sleep(5 * time.Millisecond) {
		var seq int64
		if err := pool.QueryRow(context.Background(), `SELECT coalesce(max(seq), 0) FROM ledger_materialized`).Scan(&seq); err != nil {
			tb.Fatal(err)
		}
		if seq >= e.Durable() {
			return
		}
	}
	tb.Fatal("the derived tables did not catch up within a minute")
}
