package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
)

// A set-based batch's statements unnest their arrays without a Function Scan: PostgreSQL
// gives every function of a FROM clause a tuplestore of its own, which made each
// statement's memory pass glibc's trim threshold (writeGroup's comment). The test
// records the statements of real batches (reserves, then commits and a release) and
// asks PostgreSQL for the plan of each one that unnests, with the same arguments.
func TestGroupStatementsUnnestWithoutFunctionScans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := &unnestRecorder{}
	clk := &clock{t: t0}
	opts := store.Options{LoneBatch: 1, Now: clk.Now, MaxConns: 4}
	pool := storetest.NewPoolWith(t, storetest.NewDB(t), opts, func(c *pgxpool.Config) { c.ConnConfig.Tracer = rec })
	f := &fixture{s: store.New(pool, opts), pool: pool, clk: clk}

	f.tier(t, bulkTier)
	a := f.account(t, bulkTier.Name, 1_000_000)
	limit := ledger.Micros(1_000_000)
	k, _ := f.key(t, a.ID, func(n *ledger.NewKey) { n.DailyLimit, n.MonthlyLimit = &limit, &limit })
	res := make([]ledger.Reservation, 3)
	errs := make([]error, 6)
	var calls []func()
	for i := range res {
		calls = append(calls, func() {
			res[i], errs[i] = f.s.Reserve(ctx, ledger.ReserveRequest{RequestID: reqID(), KeyID: k.ID,
				Model: "m", Amount: 1_000, Pool: ledger.PoolGeneral})
		})
	}
	batchOf(t, f.s, calls...)
	batchOf(t, f.s,
		func() { _, errs[3] = f.s.Commit(ctx, ledger.CommitRequest{ReservationID: res[0].ID, Actual: 700}) },
		func() { _, errs[4] = f.s.Commit(ctx, ledger.CommitRequest{ReservationID: res[1].ID, Actual: 900}) },
		func() { _, errs[5] = f.s.Release(ctx, res[2].ID, "cancelled") })
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	// The reservations' INSERT and UPDATE, the accounts' UPDATE, the charges' INSERT and
	// the windows' MERGE.
	if len(rec.queries) < 5 {
		t.Fatalf("recorded %d statements that unnest, want the 5 of a batch's writes", len(rec.queries))
	}
	for _, q := range rec.queries {
		rows, err := pool.Query(ctx, "EXPLAIN "+q.sql, q.args...)
		if err != nil {
			t.Fatalf("explain %s: %v", q.sql, err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("explain %s: %v", q.sql, err)
		}
		if p := strings.Join(plan, "\n"); strings.Contains(p, "Function Scan") {
			t.Errorf("%s\nplans a Function Scan:\n%s", q.sql, p)
		}
	}
	f.checkInvariants(t)
}

// unnestRecorder keeps every statement of a batch that calls unnest, with its
// arguments (pgx's BatchTracer).
type unnestRecorder struct {
	mu      sync.Mutex
	queries []recordedQuery
}

type recordedQuery struct {
	sql  string
	args []any
}

func (r *unnestRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (r *unnestRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *unnestRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *unnestRecorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if !strings.Contains(d.SQL, "unnest(") {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, recordedQuery{d.SQL, d.Args})
}

func (r *unnestRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
