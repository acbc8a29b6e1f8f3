package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Reserve holds r.Amount on the key's account when every limit allows it, in one
// statement. The checks run under the account's row lock in this order, and the first
// that fails refuses (changing nothing): key invalid, account suspended, insufficient
// credits, key monthly then daily limit, general then high-cost pool, requests per
// minute. A RequestID that already has a reservation returns that reservation, in
// whatever state it is now, without a second hold.
func (s *Store) Reserve(ctx context.Context, r ledger.ReserveRequest) (ledger.Reservation, error) {
	switch {
	case r.RequestID == "":
		return ledger.Reservation{}, ledger.Refuse(ledger.ReasonInvalidArgument, "a reservation needs a request id")
	case r.Amount < 0:
		return ledger.Reservation{}, ledger.Refuse(ledger.ReasonInvalidArgument, "a reservation amount must not be negative")
	case r.Pool != ledger.PoolGeneral && r.Pool != ledger.PoolHighCost:
		return ledger.Reservation{}, ledger.Refuse(ledger.ReasonInvalidArgument, fmt.Sprintf("unknown pool %d", r.Pool))
	case r.TTL < 0:
		return ledger.Reservation{}, ledger.Refuse(ledger.ReasonInvalidArgument, "a reservation ttl must not be negative")
	}
	if !validID(r.KeyID) {
		return ledger.Reservation{}, ledger.Refuse(ledger.ReasonInvalidAPIKey, "unknown key")
	}
	if r.TTL == 0 {
		r.TTL = s.opts.DefaultTTL
	}
	if o, ok, err := s.grouped(ctx, &batchOp{kind: opReserve, now: s.now(), reserve: r}); ok {
		if err != nil {
			return ledger.Reservation{}, err
		}
		return s.reservationOf(o)
	}
	return s.reserveAlone(ctx, r)
}

// reserveAlone is Reserve in a transaction of its own (r.TTL already defaulted): the
// path of an operation group commit did not decide.
func (s *Store) reserveAlone(ctx context.Context, r ledger.ReserveRequest) (ledger.Reservation, error) {
	owner, err := s.keyAccount(ctx, r.KeyID)
	if err != nil {
		return ledger.Reservation{}, busyRefusal(err)
	}
	var o opOutcome
	if err := s.alone(ctx, owner, "reserve", reserveCall(r, s.now(), &o)); err != nil {
		return ledger.Reservation{}, busyRefusal(err)
	}
	return s.reservationOf(o)
}

// reservationOf turns ledger_reserve's outcome into Reserve's result, remembering a held
// reservation's account, and its key's.
func (s *Store) reservationOf(o opOutcome) (ledger.Reservation, error) {
	if o.outcome != "admitted" && o.outcome != "replayed" {
		return ledger.Reservation{}, reserveRefusal(o.outcome, deref(o.limit), int(deref(o.retryAfter)))
	}
	res := ledger.Reservation{
		ID: deref(o.id), AccountID: deref(o.account), KeyID: deref(o.keyID), Model: deref(o.model),
		Amount: deref(o.amount), Pool: ledger.Pool(deref(o.pool)), State: parseState(deref(o.state)),
		Charged: deref(o.charged), CreatedAt: deref(o.created).UTC(), ExpiresAt: deref(o.expires).UTC(),
	}
	if res.State == ledger.StateHeld {
		s.resOwners.put(res.ID, res.AccountID)
	}
	s.keyOwners.put(res.KeyID, res.AccountID) // a key never changes account
	return res, nil
}

// busyRefusal turns a Reserve that gave up waiting for its account (ledger.ErrBusy) into
// the refusal a full in-flight pool gets: nothing was held, retry after a few seconds.
func busyRefusal(err error) error {
	if !errors.Is(err, ledger.ErrBusy) {
		return err
	}
	return &ledger.Refusal{
		Reason: ledger.ReasonConcurrencyLimitExceeded, RetryAfter: ledger.ConcurrencyRetryAfter,
		Detail: "the account is busy with other requests",
	}
}

// reserveRefusal turns ledger_reserve's outcome into the Refusal the domain defines.
func reserveRefusal(outcome, limit string, retryAfter int) error {
	ref := &ledger.Refusal{Limit: limit, RetryAfter: retryAfter}
	switch outcome {
	case "invalid_api_key":
		ref.Reason, ref.Detail = ledger.ReasonInvalidAPIKey, "unknown, disabled, revoked or expired key"
	case "account_suspended":
		ref.Reason, ref.Detail = ledger.ReasonAccountSuspended, "the account is suspended"
	case "insufficient_credits":
		ref.Reason, ref.Detail = ledger.ReasonInsufficientCredits, "available credits do not cover the amount"
	case "key_limit_reached":
		ref.Reason, ref.Detail = ledger.ReasonKeyLimitReached, "the key's "+limit+" spend limit would be crossed"
	case "concurrency_limit_exceeded":
		ref.Reason, ref.Detail = ledger.ReasonConcurrencyLimitExceeded, "the account's "+limit+" in-flight pool is full"
		ref.RetryAfter = ledger.ConcurrencyRetryAfter
	case "rate_limit_exceeded":
		ref.Reason, ref.Detail = ledger.ReasonRateLimitExceeded, "the tier's requests per minute are used up"
	case "already_exists":
		ref.Reason, ref.Detail = ledger.ReasonAlreadyExists, "the request id belongs to another key's reservation"
	default:
		return &Error{Op: "reserve", Err: fmt.Errorf("unexpected outcome %q", outcome)}
	}
	return ref
}

// Commit charges a held reservation min(Actual, hold) exactly once, appending the
// charge to the ledger and freeing the hold, its pool slots and its key windows' held
// amount (moving the charge into the windows of the reservation's creation time).
// A second commit returns the first result with Replayed; a released or expired
// reservation is refused with ReasonReservationSettled and nothing is charged.
func (s *Store) Commit(ctx context.Context, c ledger.CommitRequest) (ledger.CommitResult, error) {
	if c.Actual < 0 {
		return ledger.CommitResult{}, ledger.Refuse(ledger.ReasonInvalidArgument, "an actual cost must not be negative")
	}
	if !validID(c.ReservationID) {
		return ledger.CommitResult{}, ledger.ErrNotFound
	}
	if o, ok, err := s.grouped(ctx, &batchOp{kind: opCommit, now: s.now(), commit: c}); ok {
		if err != nil {
			return ledger.CommitResult{}, err
		}
		return s.commitResultOf(c.ReservationID, o)
	}
	return s.commitAlone(ctx, c)
}

// commitAlone is Commit in a transaction of its own; it fails with ledger.ErrBusy
// (retryable, never a refusal) when the account stays busy.
func (s *Store) commitAlone(ctx context.Context, c ledger.CommitRequest) (ledger.CommitResult, error) {
	acct, err := s.reservationAccount(ctx, c.ReservationID)
	if err != nil {
		return ledger.CommitResult{}, err
	}
	var o opOutcome
	if err := s.alone(ctx, acct, "commit", commitCall(c, s.now(), &o)); err != nil {
		return ledger.CommitResult{}, err
	}
	return s.commitResultOf(c.ReservationID, o)
}

// unitsArg is the usage's units as a jsonb argument: SQL NULL, not JSON null, when there
// are none.
func unitsArg(u ledger.Usage) any {
	if len(u.Units) > 0 {
		return u.Units
	}
	return nil
}

// commitResultOf turns ledger_commit's outcome into Commit's result.
func (s *Store) commitResultOf(id string, o opOutcome) (ledger.CommitResult, error) {
	if o.outcome != "not_found" {
		s.resOwners.forget(id)
	}
	switch o.outcome {
	case "committed", "replayed":
		return ledger.CommitResult{Charged: deref(o.charged), Capped: deref(o.capped), Replayed: o.outcome == "replayed"}, nil
	case "settled":
		return ledger.CommitResult{}, ledger.Refuse(ledger.ReasonReservationSettled,
			"the reservation was "+deref(o.state)+"; nothing was charged")
	case "not_found":
		return ledger.CommitResult{}, ledger.ErrNotFound
	}
	return ledger.CommitResult{}, &Error{Op: "commit", Err: fmt.Errorf("unexpected outcome %q", o.outcome)}
}

// Release frees a held reservation without charging it; reason is kept for the
// record. It is idempotent: a released or expired reservation reports that state,
// and a committed one reports StateCommitted and its charge, changing nothing.
func (s *Store) Release(ctx context.Context, reservationID, reason string) (ledger.ReleaseResult, error) {
	if !validID(reservationID) {
		return ledger.ReleaseResult{}, ledger.ErrNotFound
	}
	if o, ok, err := s.grouped(ctx, &batchOp{kind: opRelease, now: s.now(), resID: reservationID, reason: reason}); ok {
		if err != nil {
			return ledger.ReleaseResult{}, err
		}
		return s.releaseResultOf(reservationID, o)
	}
	return s.releaseAlone(ctx, reservationID, reason)
}

// releaseAlone is Release in a transaction of its own; it fails with ledger.ErrBusy
// (retryable, never a refusal) when the account stays busy.
func (s *Store) releaseAlone(ctx context.Context, reservationID, reason string) (ledger.ReleaseResult, error) {
	acct, err := s.reservationAccount(ctx, reservationID)
	if err != nil {
		return ledger.ReleaseResult{}, err
	}
	var o opOutcome
	if err := s.alone(ctx, acct, "release", releaseCall(reservationID, reason, s.now(), &o)); err != nil {
		return ledger.ReleaseResult{}, err
	}
	return s.releaseResultOf(reservationID, o)
}

// releaseResultOf turns ledger_release's outcome (a nil state: no such reservation) into
// Release's result.
func (s *Store) releaseResultOf(id string, o opOutcome) (ledger.ReleaseResult, error) {
	if o.state == nil {
		return ledger.ReleaseResult{}, ledger.ErrNotFound
	}
	s.resOwners.forget(id)
	return ledger.ReleaseResult{State: parseState(*o.state), Charged: deref(o.charged)}, nil
}

// Renew moves a held reservation's expiry to now + ttl (DefaultTTL when zero), never
// earlier than it was. A reservation no longer held is refused with
// ReasonReservationSettled.
func (s *Store) Renew(ctx context.Context, reservationID string, ttl time.Duration) (time.Time, error) {
	if ttl < 0 {
		return time.Time{}, ledger.Refuse(ledger.ReasonInvalidArgument, "a ttl must not be negative")
	}
	if !validID(reservationID) {
		return time.Time{}, ledger.ErrNotFound
	}
	if ttl == 0 {
		ttl = s.opts.DefaultTTL
	}
	var (
		renewed bool
		expires time.Time
	)
	// One statement: the UPDATE renews a held reservation; the other branch tells a
	// reservation that is not held (then renewed is false) from a missing one (no row).
	// That branch reads the statement's snapshot, which may predate a settlement the
	// UPDATE waited for; it is only used to say the reservation exists.
	err := s.pool.QueryRow(ctx, `
		WITH renewed AS (
			UPDATE reservations
			SET expires_at = greatest(expires_at, coalesce($3::timestamptz, now()) + $2::interval)
			WHERE id = $1 AND state = 'held'
			RETURNING expires_at)
		SELECT true, expires_at FROM renewed
		UNION ALL
		SELECT false, expires_at FROM reservations
		WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM renewed)`,
		reservationID, ttl, s.now()).Scan(&renewed, &expires)
	if err != nil {
		return time.Time{}, dbError("renew", err)
	}
	if !renewed {
		return time.Time{}, ledger.Refuse(ledger.ReasonReservationSettled, "the reservation is no longer held")
	}
	return expires.UTC(), nil
}

// ExpireDue moves up to limit held reservations whose expiry has passed to
// StateExpired, freeing their holds and pool slots, and returns how many it expired.
// Any number of processes may run it at once: each takes reservations nobody else is
// settling (SKIP LOCKED), and a commit racing an expiry has exactly one outcome.
func (s *Store) ExpireDue(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int
	err := s.pool.QueryRow(ctx, `SELECT ledger_expire_due($1, $2)`, limit, s.now()).Scan(&n)
	if err != nil {
		return 0, dbError("expire due", err)
	}
	return n, nil
}

// GraceLapsed gives every held reservation whose lease has run out (and that nobody is
// settling or expiring right now) a new expiry, now + grace, and returns how many it
// moved. Accounting's sweeper calls it when it was away (starting, paused, or cut off
// from the database): a lease that ran out meanwhile ran out because its owner could
// not renew it, not because the owner died, and expiring it at once would make the
// owner's answer free. Rows another transaction holds are skipped (SKIP LOCKED): they
// are being settled, renewed or expired, and a statement that waited for them while
// holding others could close a cycle with a batch settling several reservations.
func (s *Store) GraceLapsed(ctx context.Context, grace time.Duration) (int, error) {
	if grace < 0 {
		return 0, ledger.Refuse(ledger.ReasonInvalidArgument, "a grace must not be negative")
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE reservations
		SET expires_at = coalesce($2::timestamptz, now()) + $1::interval
		WHERE id IN (SELECT id FROM reservations
			WHERE state = 'held' AND expires_at <= coalesce($2::timestamptz, now())
			FOR UPDATE SKIP LOCKED)`,
		grace, s.now())
	if err != nil {
		return 0, dbError("grace lapsed", err)
	}
	return int(tag.RowsAffected()), nil
}

func parseState(s string) ledger.ReservationState {
	switch s {
	case "held":
		return ledger.StateHeld
	case "committed":
		return ledger.StateCommitted
	case "released":
		return ledger.StateReleased
	case "expired":
		return ledger.StateExpired
	}
	return 0
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
