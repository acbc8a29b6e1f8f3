package tables

import (
	"context"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// MinArchiveAfter is the shortest age ArchiveSettled accepts: past every way a settled
// reservation is still asked for (migration 0010 lists them; the longest is a settlement
// extproc retries for one hold lease past the hold's last renewal, 60 s each by default).
const MinArchiveAfter = 5 * time.Minute

// DefaultArchiveAfter is accounting's --archive-after default.
const DefaultArchiveAfter = 15 * time.Minute

// ArchiveBatch is how many reservations one ArchiveSettled call of accounting's sweeper
// moves, and ArchiveBatchesPerSweep the most calls one sweep (one a second) makes while
// batches come back full: 10,000 reservations a second keeps up with that many requests
// a second, and a backlog (archiving turned on over a large table) drains at that pace
// without holding the next expiry of holds back. The soak archives the same way.
const (
	ArchiveBatch           = 1000
	ArchiveBatchesPerSweep = 10
)

// archiveColumns are the columns a reservation keeps in the archive (all of them).
const archiveColumns = `id, request_id, account_id, key_id, model, amount, pool, state, actual, charged,
	created_at, expires_at, settled_at, release_reason`

// ArchiveSettled moves up to limit reservations settled more than olderThan ago (by the
// Store's clock) from reservations to reservations_archive, oldest first, and returns how
// many it moved. Each row moves in one statement (deleted and inserted together), so a
// reservation is in exactly one of the two tables. Any number of processes may run it at
// once: each takes rows nobody else is moving (SKIP LOCKED). Held reservations never move.
//
// The rows are found along the primary key: a reservation's id starts with its creation
// time in milliseconds (migration 0006), and a settled reservation was created before it
// was settled, so every one settled before the cutoff has an id below the smallest id of
// the cutoff's millisecond. Reservations made before 0006 (random ids) are moved only
// when their id happens to fall below it; what moves is always one settled before the
// cutoff.
func (s *Store) ArchiveSettled(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	if olderThan < MinArchiveAfter {
		return 0, ledger.Refuse(ledger.ReasonInvalidArgument, "settled reservations are archived "+MinArchiveAfter.String()+" after settlement at the earliest")
	}
	if limit <= 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `
		WITH cut AS (
			SELECT c.t, (lpad(to_hex(floor(extract(epoch FROM c.t) * 1000)::bigint), 12, '0') || repeat('0', 20))::uuid AS id
			FROM (SELECT coalesce($1::timestamptz, now()) - $2::interval AS t) c),
		picked AS (
			SELECT r.id FROM reservations r
			WHERE r.id < (SELECT id FROM cut) AND r.state <> 'held' AND r.settled_at < (SELECT t FROM cut)
			ORDER BY r.id LIMIT $3 FOR UPDATE OF r SKIP LOCKED),
		moved AS (
			DELETE FROM reservations WHERE id IN (SELECT id FROM picked)
			RETURNING `+archiveColumns+`)
		INSERT INTO reservations_archive (`+archiveColumns+`) SELECT `+archiveColumns+` FROM moved`,
		s.now(), olderThan, limit)
	if err != nil {
		return 0, dbError("archive settled", err)
	}
	return int(tag.RowsAffected()), nil
}
