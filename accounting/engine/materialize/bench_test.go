package materialize_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/engine/materialize"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// BenchmarkApplyPairs materializes 1,000 reserve+commit pairs over 256 accounts per
// Apply call, and reports the time and the write-ahead log (the server's, so other
// databases' writes meanwhile count too) per pair.
func BenchmarkApplyPairs(b *testing.B) {
	const accounts, pairs = 256, 1000
	ctx := context.Background()
	pool := tablestest.NewPool(b, tablestest.NewDB(b), 4)
	m := materialize.New(pool, 0, machine.Snapshot{}, 0)
	var setup []machine.Event
	accs, keys := make([]string, accounts), make([]string, accounts)
	for i := range accounts {
		accs[i], keys[i] = uuid.NewString(), uuid.NewString()
		setup = append(setup,
			machine.AccountCreated{ID: accs[i], Tier: ledger.DefaultTier, At: t2},
			machine.ToppedUp{AccountID: accs[i], Amount: 1 << 50, At: t2},
			machine.KeyCreated{ID: keys[i], AccountID: accs[i], Hash: hash(keys[i]), At: t2})
	}
	seq := int64(0)
	apply := func(evs []machine.Event) {
		if err := m.Apply(ctx, seqsFrom(seq+1, len(evs)), evs); err != nil {
			b.Fatal(err)
		}
		seq += int64(len(evs))
	}
	apply(setup)

	batches := make([][]machine.Event, b.N)
	for n := range batches {
		at := t2.Add(time.Duration(n) * time.Second)
		for i := range pairs {
			id := uuid.Must(uuid.NewV7()).String()
			a := i % accounts
			batches[n] = append(batches[n], reserved(id, accs[a], keys[a], 20_000, ledger.PoolGeneral, at),
				machine.Committed{ReservationID: id, Actual: 12_000, Charged: 12_000, UpstreamModel: "up", Channel: "ch",
					Usage: ledger.Usage{InputTokens: 100, OutputTokens: 200, Components: components}, At: at})
		}
	}
	before := walLSN(b, pool)
	b.ResetTimer()
	for n := range b.N {
		apply(batches[n])
	}
	b.StopTimer()
	var wal int64
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn() - $1::pg_lsn`, before).Scan(&wal); err != nil {
		b.Fatal(err)
	}
	total := float64(b.N * pairs)
	b.ReportMetric(float64(b.Elapsed().Microseconds())/total, "µs/pair")
	b.ReportMetric(float64(wal)/total, "WAL-B/pair")
	b.ReportMetric(0, "ns/op")
}

func walLSN(b *testing.B, pool *pgxpool.Pool) string {
	var lsn string
	if err := pool.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		b.Fatal(fmt.Errorf("wal position: %w", err))
	}
	return lsn
}
