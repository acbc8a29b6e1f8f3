package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Lease is a shard's ownership: the epoch that fences the owner's appends, the owner's
// name (unique per process: a restarted process takes a new one), the address clients
// reach it at, and the end of the lease on the database's clock.
type Lease struct {
	Epoch       int64
	Owner, Addr string
	Until       time.Time
}

// ErrHeld: another owner's lease is live. Acquire returns it as a *HeldError.
var ErrHeld = errors.New("journal: the shard's lease is held by another owner")

// HeldError is ErrHeld with the lease that is held.
type HeldError struct{ Lease Lease }

func (e *HeldError) Error() string {
	return fmt.Sprintf("%v: %s at %s, epoch %d, until %s", ErrHeld, e.Lease.Owner, e.Lease.Addr,
		e.Lease.Epoch, e.Lease.Until.Format(time.RFC3339Nano))
}

func (e *HeldError) Unwrap() error { return ErrHeld }

// acquireSQL takes the lease when there is none, when it has expired, or when it is
// owner's already; the epoch stays only when owner renews its own live lease. Updating
// the row waits for the appends that hold it FOR SHARE. The times are read after the
// row is locked (clock_timestamp), not when the statement began waiting.
const acquireSQL = `
INSERT INTO ledger_owner AS o (shard, epoch, owner, addr, lease_until)
VALUES ($1, 1, $2, $3, clock_timestamp() + $4::bigint * interval '1 microsecond')
ON CONFLICT (shard) DO UPDATE SET
	epoch = CASE WHEN o.owner = excluded.owner AND o.lease_until > clock_timestamp()
		THEN o.epoch ELSE o.epoch + 1 END,
	owner = excluded.owner,
	addr = excluded.addr,
	lease_until = clock_timestamp() + $4::bigint * interval '1 microsecond'
WHERE o.owner = excluded.owner OR o.lease_until <= clock_timestamp() OR ($5 AND o.addr = excluded.addr)
RETURNING epoch, owner, addr, lease_until`

// Acquire makes owner, reached at addr, the shard's owner for ttl, when the lease is
// free, has expired or is owner's already. The epoch is raised unless owner's own lease
// was still live. When another owner's lease is live it returns a *HeldError (ErrHeld).
// It returns once every append of an older epoch has committed or been fenced, so Last
// then sees every record the previous owners will ever have written.
func (j *Journal) Acquire(ctx context.Context, owner, addr string, ttl time.Duration) (Lease, error) {
	return j.acquire(ctx, owner, addr, ttl, false)
}

// Claim is Acquire that also takes a live lease naming addr: for a process that has
// just bound addr itself, which proves the process that held it — the lease's owner —
// gone (a restart on the same address after a crash). Fencing keeps it safe whatever
// the address says; the caller must only claim an address no other live process can
// hold (a specific IP and port it listens on, never a shared name).
func (j *Journal) Claim(ctx context.Context, owner, addr string, ttl time.Duration) (Lease, error) {
	return j.acquire(ctx, owner, addr, ttl, true)
}

func (j *Journal) acquire(ctx context.Context, owner, addr string, ttl time.Duration, claim bool) (Lease, error) {
	l, err := j.lease(ctx, acquireSQL, j.shard, owner, addr, ttl.Microseconds(), claim)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, cerr := j.Current(ctx)
		if cerr != nil {
			return Lease{}, cerr
		}
		return Lease{}, &HeldError{Lease: cur}
	}
	if err != nil {
		return Lease{}, fmt.Errorf("journal: acquire: %w", err)
	}
	return l, nil
}

// Renew extends the lease of epoch to ttl from now. It returns ErrFenced when epoch is
// no longer the shard's. A lease that expired without anyone taking over is renewed:
// nobody else wrote meanwhile.
func (j *Journal) Renew(ctx context.Context, epoch int64, ttl time.Duration) (Lease, error) {
	l, err := j.lease(ctx, `UPDATE ledger_owner
		SET lease_until = clock_timestamp() + $3::bigint * interval '1 microsecond'
		WHERE shard = $1 AND epoch = $2
		RETURNING epoch, owner, addr, lease_until`, j.shard, epoch, ttl.Microseconds())
	if errors.Is(err, pgx.ErrNoRows) {
		return Lease{}, ErrFenced
	}
	if err != nil {
		return Lease{}, fmt.Errorf("journal: renew: %w", err)
	}
	return l, nil
}

// Release ends the lease of epoch now, so that a standby takes over at once: what an
// owner that stops on purpose does. The epoch stays; the next owner's Acquire bumps it.
// ErrFenced when epoch is no longer current.
func (j *Journal) Release(ctx context.Context, epoch int64) error {
	_, err := j.lease(ctx, `UPDATE ledger_owner SET lease_until = clock_timestamp()
		WHERE shard = $1 AND epoch = $2
		RETURNING epoch, owner, addr, lease_until`, j.shard, epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrFenced
	}
	if err != nil {
		return fmt.Errorf("journal: release: %w", err)
	}
	return nil
}

// Current returns the shard's lease as it is, live or not; the zero Lease when the
// shard never had an owner.
func (j *Journal) Current(ctx context.Context) (Lease, error) {
	l, err := j.lease(ctx, `SELECT epoch, owner, addr, lease_until FROM ledger_owner WHERE shard = $1`, j.shard)
	if errors.Is(err, pgx.ErrNoRows) {
		return Lease{}, nil
	}
	if err != nil {
		return Lease{}, fmt.Errorf("journal: current owner: %w", err)
	}
	return l, nil
}

func (j *Journal) lease(ctx context.Context, sql string, args ...any) (Lease, error) {
	var l Lease
	err := j.pool.QueryRow(ctx, sql, args...).Scan(&l.Epoch, &l.Owner, &l.Addr, &l.Until)
	return l, err
}
