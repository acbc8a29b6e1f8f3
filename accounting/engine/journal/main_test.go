package journal_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

func TestMain(m *testing.M) { tablestest.Main(m) }

// newPool returns a pool of maxConns connections on a fresh, migrated database.
func newPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	return tablestest.NewPool(t, tablestest.NewDB(t), maxConns)
}

// owned returns the journal of shard on pool with opts, and the epoch of a lease on it
// taken by owner.
func owned(t testing.TB, pool *pgxpool.Pool, shard int32, opts journal.Options, owner string) (*journal.Journal, int64) {
	t.Helper()
	j := journal.NewWith(pool, shard, opts)
	l, err := j.Acquire(context.Background(), owner, owner+":7000", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return j, l.Epoch
}

// batch returns n records numbered from first with bodies naming them.
func batch(first int64, n int) []journal.Record {
	recs := make([]journal.Record, n)
	for i := range recs {
		recs[i] = journal.Record{Seq: first + int64(i), Body: fmt.Appendf(nil, "record %d", first+int64(i))}
	}
	return recs
}

// readAll returns every record of j, in order.
func readAll(t testing.TB, j *journal.Journal) []journal.Record {
	t.Helper()
	recs, err := j.Read(context.Background(), 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// lastOf returns j.Last, failing t on an error.
func lastOf(t testing.TB, j *journal.Journal) int64 {
	t.Helper()
	last, err := j.Last(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return last
}
