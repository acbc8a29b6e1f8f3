package journal_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine/journal"
)

// walMeter reads the server's WAL position and its count of WAL syncs (pg_stat_wal).
// Both are the whole server's: other sessions' writes count too.
type walMeter struct {
	pool      *pgxpool.Pool
	lsn       string
	syncs     int64
	syncsSeen bool
}

func (m *walMeter) start(b *testing.B) {
	b.Helper()
	ctx := context.Background()
	// The counters' last flush may lag: force the statistics out first.
	_, _ = m.pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`)
	err := m.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text, coalesce((SELECT wal_sync FROM pg_stat_wal), -1)`).Scan(&m.lsn, &m.syncs)
	if err != nil {
		b.Fatal(err)
	}
	m.syncsSeen = m.syncs >= 0
}

// report adds WAL bytes per record and WAL syncs per batch since start.
func (m *walMeter) report(b *testing.B, records, batches int) {
	b.Helper()
	ctx := context.Background()
	time.Sleep(600 * time.Millisecond) // pg_stat_wal is flushed at most every 500 ms or so
	var wal float64
	var syncs int64
	if err := m.pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn), coalesce((SELECT wal_sync FROM pg_stat_wal), -1)`,
		m.lsn).Scan(&wal, &syncs); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(wal/float64(records), "WAL-B/record")
	if m.syncsSeen {
		b.ReportMetric(float64(syncs-m.syncs)/float64(batches), "fsyncs/batch")
	}
}

// BenchmarkAppend appends batches of 100-byte records, one batch at a time, and
// reports the time and the WAL per record and the WAL syncs per batch.
func BenchmarkAppend(b *testing.B) {
	body := bytes.Repeat([]byte{'x'}, 100)
	for _, size := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprint("batch=", size), func(b *testing.B) {
			ctx := context.Background()
			pool := newPool(b, 2)
			j, epoch := owned(b, pool, 1, journal.Options{}, "bench")
			recs := make([]journal.Record, size)
			next := int64(1)
			appendBatch := func() {
				for i := range recs {
					recs[i] = journal.Record{Seq: next + int64(i), Body: body}
				}
				if err := j.Append(ctx, epoch, recs); err != nil {
					b.Fatal(err)
				}
				next += int64(size)
			}
			appendBatch() // the partitions and the prepared statement
			m := walMeter{pool: pool}
			m.start(b)
			b.ResetTimer()
			for b.Loop() {
				appendBatch()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*size), "µs/record")
			m.report(b, b.N*size, b.N)
		})
	}
}

// BenchmarkNotify measures what a NOTIFY in each append would cost: a one-row insert
// with and without pg_notify in the same statement.
func BenchmarkNotify(b *testing.B) {
	for _, notify := range []bool{false, true} {
		b.Run(fmt.Sprint("notify=", notify), func(b *testing.B) {
			ctx := context.Background()
			pool := newPool(b, 2)
			if _, err := pool.Exec(ctx, `CREATE TABLE bench_notify (id bigint PRIMARY KEY, body bytea)`); err != nil {
				b.Fatal(err)
			}
			sql := `INSERT INTO bench_notify VALUES ($1, $2)`
			if notify {
				sql = `WITH n AS (SELECT pg_notify('bench', '')) INSERT INTO bench_notify SELECT $1, $2 FROM n`
			}
			body := bytes.Repeat([]byte{'x'}, 100)
			m := walMeter{pool: pool}
			m.start(b)
			id := int64(0)
			for b.Loop() {
				id++
				if _, err := pool.Exec(ctx, sql, id, body); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			m.report(b, b.N, b.N)
		})
	}
}
