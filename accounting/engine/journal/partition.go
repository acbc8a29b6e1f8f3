package journal

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// partition is one partition of the shard's journal: seqs in [lo, hi).
type partition struct {
	name     string
	lo, hi   int64
	detached bool // a DETACH … CONCURRENTLY that did not finish
}

// partitionPrefix starts the names of the shard's partitions, which end in lo_hi.
func (j *Journal) partitionPrefix() string { return fmt.Sprintf("ledger_journal_%d_", j.shard) }

// ddlLockTimeout bounds the wait of partition DDL for its locks: inserts do not wait
// for ATTACH, but ATTACH waits for whatever holds a stronger lock; it is retried later.
const ddlLockTimeout = "100ms"

// ensurePartitions makes sure that partitions hold seqs up to last and a whole
// partition after it, creating them when they do not. A batch that fits in the
// partitions that exist is written even when creating the next one fails (it is tried
// again with the next batch).
func (j *Journal) ensurePartitions(ctx context.Context, first, last int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	want := last + j.opts.PartitionSize
	var err error
	for attempt := 0; j.hi < want && attempt < 3; attempt++ {
		if err = j.loadEnd(ctx); err != nil {
			break
		}
		for j.hi < want && err == nil {
			lo := j.hi
			if lo == 0 {
				lo = first - first%j.opts.PartitionSize
			}
			if err = j.createPartition(ctx, lo, lo+j.opts.PartitionSize); err == nil {
				j.hi = lo + j.opts.PartitionSize
			}
		}
		if err == nil {
			break
		}
		// Another journal of the shard may have created it: look again.
	}
	if j.hi > last {
		return nil // the batch has its partition; the next one is for later
	}
	return fmt.Errorf("journal: partition for seq %d: %w", last, err)
}

// loadEnd sets j.hi to the end of the shard's last partition (0 when there is none).
func (j *Journal) loadEnd(ctx context.Context) error {
	parts, err := j.partitions(ctx)
	if err != nil {
		return err
	}
	j.hi = 0
	for _, p := range parts {
		j.hi = max(j.hi, p.hi)
	}
	return nil
}

// createPartition creates a table for seqs [lo, hi) and attaches it, in a transaction.
// Attaching takes SHARE UPDATE EXCLUSIVE on ledger_journal (CREATE TABLE … PARTITION OF
// would take ACCESS EXCLUSIVE and stop appends and reads meanwhile).
func (j *Journal) createPartition(ctx context.Context, lo, hi int64) error {
	name := pgx.Identifier{fmt.Sprintf("%s%d_%d", j.partitionPrefix(), lo, hi)}.Sanitize()
	return pgx.BeginFunc(ctx, j.pool, func(tx pgx.Tx) error {
		for _, sql := range []string{
			"SET LOCAL lock_timeout = '" + ddlLockTimeout + "'",
			"CREATE TABLE " + name + " (LIKE ledger_journal)",
			fmt.Sprintf("ALTER TABLE ledger_journal ATTACH PARTITION %s FOR VALUES FROM (%d, %d) TO (%d, %d)",
				name, j.shard, lo, j.shard, hi),
		} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("creating partition [%d, %d): %w", lo, hi, err)
			}
		}
		return nil
	})
}

// partitions lists the shard's partitions, from their names.
func (j *Journal) partitions(ctx context.Context) ([]partition, error) {
	rows, err := j.pool.Query(ctx, `SELECT c.relname, i.inhdetachpending
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'ledger_journal'::regclass AND starts_with(c.relname, $1)`, j.partitionPrefix())
	if err != nil {
		return nil, fmt.Errorf("journal: listing partitions: %w", err)
	}
	parts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (partition, error) {
		var p partition
		if err := row.Scan(&p.name, &p.detached); err != nil {
			return p, err
		}
		bounds := strings.Split(strings.TrimPrefix(p.name, j.partitionPrefix()), "_")
		if len(bounds) != 2 {
			return p, fmt.Errorf("partition %s: not named …_lo_hi", p.name)
		}
		var err1, err2 error
		p.lo, err1 = strconv.ParseInt(bounds[0], 10, 64)
		p.hi, err2 = strconv.ParseInt(bounds[1], 10, 64)
		if err1 != nil || err2 != nil {
			return p, fmt.Errorf("partition %s: not named …_lo_hi", p.name)
		}
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: listing partitions: %w", err)
	}
	return parts, nil
}

// DropCovered drops the shard's partitions whose records are all covered by a snapshot
// taken at least retain ago, and materialized (ledger_materialized): those that end
// (exclusive) at or before both the snapshot's seq and the materialized seq, so the
// snapshot's own record stays. It then forgets the bodiless snapshots older than that
// snapshot. It returns how many partitions it dropped. Each is detached concurrently
// (appends and reads go on) and then dropped; one left detaching by an interrupted run
// is finished first.
func (j *Journal) DropCovered(ctx context.Context, retain time.Duration) (int, error) {
	var covered int64
	// least() skips NULLs: a shard without an old snapshot or without a materialized seq
	// has nothing covered, hence the coalesce of each.
	err := j.pool.QueryRow(ctx, `SELECT least(
			coalesce((SELECT max(seq) FROM ledger_snapshots
			          WHERE shard = $1 AND taken_at <= now() - $2::bigint * interval '1 microsecond'), 0),
			coalesce((SELECT seq FROM ledger_materialized WHERE shard = $1), 0))`,
		j.shard, retain.Microseconds()).Scan(&covered)
	if err != nil {
		return 0, fmt.Errorf("journal: retention: %w", err)
	}
	if covered == 0 {
		return 0, nil
	}
	parts, err := j.partitions(ctx)
	if err != nil {
		return 0, err
	}
	dropped := 0
	for _, p := range parts {
		if p.hi > covered {
			continue
		}
		name := pgx.Identifier{p.name}.Sanitize()
		detach := "ALTER TABLE ledger_journal DETACH PARTITION " + name + " CONCURRENTLY"
		if p.detached {
			detach = "ALTER TABLE ledger_journal DETACH PARTITION " + name + " FINALIZE"
		}
		for _, sql := range []string{detach, "DROP TABLE " + name} {
			if _, err := j.pool.Exec(ctx, sql); err != nil {
				return dropped, fmt.Errorf("journal: retention: dropping %s: %w", p.name, err)
			}
		}
		dropped++
	}
	// The bodiless snapshots older than the newest one retention may use are not needed
	// any more.
	if _, err := j.pool.Exec(ctx, `DELETE FROM ledger_snapshots WHERE shard = $1 AND body IS NULL AND seq < (
			SELECT max(seq) FROM ledger_snapshots
			WHERE shard = $1 AND taken_at <= now() - $2::bigint * interval '1 microsecond')`,
		j.shard, retain.Microseconds()); err != nil {
		return dropped, fmt.Errorf("journal: retention: forgetting old snapshots: %w", err)
	}
	return dropped, nil
}
