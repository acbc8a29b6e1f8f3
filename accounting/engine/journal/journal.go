package journal

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Record is one entry of a shard's journal: its sequence number and its encoded body.
type Record struct {
	Seq  int64
	Body []byte
}

var (
	// ErrFenced: the epoch given is no longer the shard's (another owner took over).
	// Nothing was written.
	ErrFenced = errors.New("journal: fenced: the shard's epoch has changed")
	// ErrSeq: the records are not numbered consecutively after the journal's last
	// record (a gap or a sequence number already written). Nothing was written.
	ErrSeq = errors.New("journal: records do not follow the journal's last record")
)

// Options tune a Journal; the zero value takes the defaults.
type Options struct {
	// PartitionSize is how many sequence numbers one partition of ledger_journal holds
	// (default DefaultPartitionSize). Journals of one shard may differ: a new partition
	// starts where the last one ends.
	PartitionSize int64
	// KeepSnapshots is how many of the newest snapshots keep their body
	// (default DefaultKeepSnapshots).
	KeepSnapshots int
}

const (
	// DefaultPartitionSize: about 1 GB of journal at 250 bytes a record, and days of
	// records at thousands a second.
	DefaultPartitionSize = 1 << 22
	// DefaultKeepSnapshots is the default of Options.KeepSnapshots.
	DefaultKeepSnapshots = 3
)

// Journal reads and writes one shard's journal. It is safe for concurrent use, but
// the owner appends one batch at a time (see the package doc).
type Journal struct {
	pool  *pgxpool.Pool
	shard int32
	opts  Options

	mu sync.Mutex
	hi int64 // the end (exclusive) of the shard's partitions, as last seen; 0: unknown
}

// New returns the journal of shard on pool, with the default Options.
func New(pool *pgxpool.Pool, shard int32) *Journal {
	return NewWith(pool, shard, Options{})
}

// NewWith returns the journal of shard on pool with opts.
func NewWith(pool *pgxpool.Pool, shard int32, opts Options) *Journal {
	if opts.PartitionSize <= 0 {
		opts.PartitionSize = DefaultPartitionSize
	}
	if opts.KeepSnapshots <= 0 {
		opts.KeepSnapshots = DefaultKeepSnapshots
	}
	return &Journal{pool: pool, shard: shard, opts: opts}
}

// appendSQL inserts the batch ($4, numbered from $3) only while the shard's owner row
// has epoch $2, which it locks FOR SHARE until the commit, and only if the record
// before the first is there (or the first is 1). It answers whether the epoch was
// current, whether the predecessor was there, and how many rows it inserted: all of
// them or none, as the insert's rows are the batch times one row of o times one of p.
const appendSQL = `
WITH o AS (
	SELECT epoch FROM ledger_owner WHERE shard = $1 AND epoch = $2 FOR SHARE
), p AS (
	SELECT $3::bigint = 1 OR EXISTS (
		SELECT FROM ledger_journal WHERE shard = $1 AND seq = $3::bigint - 1) AS ok
), ins AS (
	INSERT INTO ledger_journal (shard, seq, epoch, body)
	SELECT $1, $3::bigint + u.i - 1, o.epoch, u.b
	FROM o, p, unnest($4::bytea[]) WITH ORDINALITY AS u(b, i)
	WHERE p.ok
	RETURNING 1
)
SELECT (SELECT count(*) FROM o), (SELECT ok FROM p), (SELECT count(*) FROM ins)`

// Append writes recs, numbered consecutively from the record after the journal's last,
// as the owner of epoch: all of them, in one transaction, or none. It returns ErrFenced
// when epoch is no longer the shard's, ErrSeq when the records do not follow the last
// one. An empty batch writes nothing and checks nothing.
func (j *Journal) Append(ctx context.Context, epoch int64, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	first := recs[0].Seq
	bodies := make([][]byte, len(recs))
	for i, r := range recs {
		if r.Seq != first+int64(i) || first < 1 {
			return fmt.Errorf("%w: record %d of the batch has seq %d after %d", ErrSeq, i, r.Seq, first)
		}
		bodies[i] = r.Body
		if bodies[i] == nil {
			bodies[i] = []byte{} // NULL is refused; an empty body is a body
		}
	}
	last := recs[len(recs)-1].Seq
	if err := j.ensurePartitions(ctx, first, last); err != nil {
		return err
	}
	var owners, inserted int64
	var follows bool
	err := j.pool.QueryRow(ctx, appendSQL, j.shard, epoch, first, bodies).Scan(&owners, &follows, &inserted)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23505": // unique_violation
		return fmt.Errorf("%w: seq %d..%d: %s", ErrSeq, first, last, pgErr.Detail)
	case err != nil:
		return fmt.Errorf("journal: append %d..%d: %w", first, last, err)
	}
	switch {
	case owners == 0:
		return ErrFenced
	case !follows:
		return fmt.Errorf("%w: no record %d before %d", ErrSeq, first-1, first)
	case inserted != int64(len(recs)):
		return fmt.Errorf("journal: append %d..%d: inserted %d records", first, last, inserted)
	}
	return nil
}

// Read returns at most limit records with seq > after, in order.
func (j *Journal) Read(ctx context.Context, after int64, limit int) ([]Record, error) {
	rows, err := j.pool.Query(ctx, `SELECT seq, body FROM ledger_journal
		WHERE shard = $1 AND seq > $2 ORDER BY seq LIMIT $3`, j.shard, after, limit)
	if err != nil {
		return nil, fmt.Errorf("journal: read after %d: %w", after, err)
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Record, error) {
		var r Record
		err := row.Scan(&r.Seq, &r.Body)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("journal: read after %d: %w", after, err)
	}
	return recs, nil
}

// Last returns the highest sequence number in the journal, 0 when it is empty.
func (j *Journal) Last(ctx context.Context) (int64, error) {
	var last int64
	err := j.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM ledger_journal WHERE shard = $1`, j.shard).Scan(&last)
	if err != nil {
		return 0, fmt.Errorf("journal: last: %w", err)
	}
	return last, nil
}
