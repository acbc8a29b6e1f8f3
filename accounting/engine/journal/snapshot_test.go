package journal_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine/journal"
)

// The newest snapshot is the one loaded; only the newest few keep their bodies.
func TestSnapshots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, 2)
	j := journal.NewWith(pool, 1, journal.Options{KeepSnapshots: 2})
	if seq, body, err := j.LatestSnapshot(ctx); seq != 0 || body != nil || err != nil {
		t.Fatalf("no snapshot yet: %d, %q, %v", seq, body, err)
	}
	for _, seq := range []int64{10, 20, 30, 30} {
		if err := j.SaveSnapshot(ctx, seq, fmt.Appendf(nil, "state at %d", seq)); err != nil {
			t.Fatal(err)
		}
		if got, body, err := j.LatestSnapshot(ctx); got != seq || string(body) != fmt.Sprint("state at ", seq) || err != nil {
			t.Errorf("after saving %d: %d, %q, %v", seq, got, body, err)
		}
	}
	// Another shard's snapshots are its own.
	if seq, _, err := journal.New(pool, 2).LatestSnapshot(ctx); seq != 0 || err != nil {
		t.Errorf("shard 2: %d, %v; want none", seq, err)
	}
	if got, want := snapshotRows(t, pool, 1), []string{"10 -", "20 body", "30 body"}; !slices.Equal(got, want) {
		t.Errorf("snapshots %v, want %v", got, want)
	}
}

// snapshotRows lists shard's snapshots as "seq body" or "seq -" when bodiless.
func snapshotRows(t *testing.T, pool *pgxpool.Pool, shard int32) []string {
	t.Helper()
	return queryStrings(t, pool, `SELECT seq::text || CASE WHEN body IS NULL THEN ' -' ELSE ' body' END
		FROM ledger_snapshots WHERE shard = $1 ORDER BY seq`, shard)
}

// partitionNames lists the partitions of ledger_journal, by name.
func partitionNames(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	return queryStrings(t, pool, `SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'ledger_journal'::regclass ORDER BY c.relname`)
}

// queryStrings returns the one text column of sql's rows.
func queryStrings(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Retention drops the partitions that an old enough snapshot covers and that are
// materialized, no others, and the journal goes on after it.
func TestDropCovered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, 4)
	opts := journal.Options{PartitionSize: 10, KeepSnapshots: 1}
	j, epoch := owned(t, pool, 1, opts, "a")
	other, otherEpoch := owned(t, pool, 2, opts, "a")
	if err := j.Append(ctx, epoch, batch(1, 45)); err != nil { // partitions [0,10) … [40,50), and [50,60) ahead
		t.Fatal(err)
	}
	if err := other.Append(ctx, otherEpoch, batch(1, 5)); err != nil {
		t.Fatal(err)
	}
	snapshot := func(seq int64, age time.Duration) {
		t.Helper()
		if err := j.SaveSnapshot(ctx, seq, []byte("s")); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE ledger_snapshots SET taken_at = now() - $3::bigint * interval '1 microsecond'
			WHERE shard = $1 AND seq = $2`, int32(1), seq, age.Microseconds()); err != nil {
			t.Fatal(err)
		}
	}
	materialized := func(seq int64) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO ledger_materialized VALUES (1, $1)
			ON CONFLICT (shard) DO UPDATE SET seq = excluded.seq`, seq); err != nil {
			t.Fatal(err)
		}
	}
	const retain = time.Hour
	steps := []struct {
		name    string
		setup   func()
		dropped int
		first   int64 // the first record left
	}{
		{"no snapshot", func() { materialized(45) }, 0, 1},
		{"a snapshot too young", func() { snapshot(35, time.Minute) }, 0, 1},
		{"an old snapshot, not all materialized", func() { snapshot(25, 2*time.Hour); materialized(9) }, 0, 1},
		{"materialized to 20", func() { materialized(20) }, 2, 20},
		{"an old snapshot ending a partition", func() { snapshot(29, 3*time.Hour); materialized(45) }, 0, 20},
		{"the young one grows old", func() { snapshot(35, 2*time.Hour) }, 1, 30},
		{"again", func() {}, 0, 30},
	}
	for _, s := range steps {
		s.setup()
		n, err := j.DropCovered(ctx, retain)
		if err != nil || n != s.dropped {
			t.Fatalf("%s: dropped %d, %v; want %d", s.name, n, err, s.dropped)
		}
		recs := readAll(t, j)
		if len(recs) == 0 || recs[0].Seq != s.first || recs[len(recs)-1].Seq != 45 {
			t.Fatalf("%s: records %d.., want %d..45", s.name, recs[0].Seq, s.first)
		}
	}
	want := []string{"ledger_journal_1_30_40", "ledger_journal_1_40_50", "ledger_journal_1_50_60",
		"ledger_journal_2_0_10", "ledger_journal_2_10_20"}
	if got := partitionNames(t, pool); !slices.Equal(got, want) {
		t.Errorf("partitions %v, want %v", got, want)
	}
	// The bodiless snapshots older than the one retention used are gone.
	if got, want := snapshotRows(t, pool, 1), []string{"35 body"}; !slices.Equal(got, want) {
		t.Errorf("snapshots %v, want %v", got, want)
	}
	if err := j.Append(ctx, epoch, batch(46, 20)); err != nil {
		t.Errorf("appending after retention: %v", err)
	}
	if last := lastOf(t, j); last != 65 {
		t.Errorf("Last = %d, want 65", last)
	}
}
