package journal

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SaveSnapshot stores body as the shard's state after record seq (replacing one saved
// for the same seq), and keeps the bodies of only the newest Options.KeepSnapshots
// snapshots: older ones keep their seq and time, for retention (see the package doc).
func (j *Journal) SaveSnapshot(ctx context.Context, seq int64, body []byte) error {
	if body == nil {
		body = []byte{}
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO ledger_snapshots (shard, seq, body) VALUES ($1, $2, $3)
		ON CONFLICT (shard, seq) DO UPDATE SET body = excluded.body, taken_at = excluded.taken_at`,
		j.shard, seq, body)
	b.Queue(`UPDATE ledger_snapshots SET body = NULL WHERE shard = $1 AND body IS NOT NULL AND seq < (
		SELECT min(seq) FROM (SELECT seq FROM ledger_snapshots WHERE shard = $1 AND body IS NOT NULL
		                      ORDER BY seq DESC LIMIT $2) newest)`, j.shard, j.opts.KeepSnapshots)
	// A batch runs in one implicit transaction, in one round trip.
	if err := j.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("journal: save snapshot at %d: %w", seq, err)
	}
	return nil
}

// LatestSnapshot returns the newest snapshot with its body: (0, nil, nil) when there is
// none.
func (j *Journal) LatestSnapshot(ctx context.Context) (seq int64, body []byte, err error) {
	err = j.pool.QueryRow(ctx, `SELECT seq, body FROM ledger_snapshots
		WHERE shard = $1 AND body IS NOT NULL ORDER BY seq DESC LIMIT 1`, j.shard).Scan(&seq, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("journal: latest snapshot: %w", err)
	}
	return seq, body, nil
}

// SnapshotAtOrBefore returns the newest snapshot with a body whose seq is at most seq:
// (0, nil, nil) when there is none.
func (j *Journal) SnapshotAtOrBefore(ctx context.Context, seq int64) (int64, []byte, error) {
	var at int64
	var body []byte
	err := j.pool.QueryRow(ctx, `SELECT seq, body FROM ledger_snapshots
		WHERE shard = $1 AND body IS NOT NULL AND seq <= $2 ORDER BY seq DESC LIMIT 1`, j.shard, seq).Scan(&at, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("journal: snapshot at or before %d: %w", seq, err)
	}
	return at, body, nil
}
