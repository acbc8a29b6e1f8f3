package ledger

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned when an account, key, reservation or task does not exist.
var ErrNotFound = errors.New("not found")

// ErrBusy is returned when an operation gave up waiting for an account that other calls
// hold (a row lock wait past the store's lock timeout, a statement past its timeout, or
// the account's share of database connections in use for too long). Nothing changed; the
// same call can succeed on retry. Reserve turns it into a concurrency refusal; a
// settlement call (Commit, Release, Renew) must be retried by its owner.
var ErrBusy = errors.New("account busy")

// ErrUnavailable is returned when the ledger cannot decide now (this process is not the
// ledger's owner, or the owner stopped). Nothing was decided by this call; the caller
// retries, at the owner when an error names it.
var ErrUnavailable = errors.New("ledger unavailable")

// NotOwnerError answers a call made to a process that does not own the ledger; Addr is
// where the owner is, when known.
type NotOwnerError struct{ Addr string }

func (e *NotOwnerError) Error() string {
	if e.Addr == "" {
		return "not the ledger owner; the owner is not known yet"
	}
	return "not the ledger owner; the owner is at " + e.Addr
}

// Unwrap makes errors.Is(err, ErrUnavailable) true.
func (e *NotOwnerError) Unwrap() error { return ErrUnavailable }

// Reason says why the ledger refused an operation.
type Reason int

const (
	ReasonInvalidAPIKey Reason = iota + 1
	ReasonAccountSuspended
	ReasonInsufficientCredits
	ReasonKeyLimitReached
	ReasonConcurrencyLimitExceeded
	ReasonRateLimitExceeded
	// ReasonReservationSettled: the reservation was released or expired; nothing charged.
	ReasonReservationSettled
	ReasonInvalidArgument
	ReasonAlreadyExists
	// ReasonModelNotAllowed: the key or a project it is in does not allow the model.
	ReasonModelNotAllowed
	// ReasonInUse: what the call would remove is still in use (a project with keys,
	// child projects or requests in flight).
	ReasonInUse
)

var reasonNames = map[Reason]string{
	ReasonInvalidAPIKey:            "invalid_api_key",
	ReasonAccountSuspended:         "account_suspended",
	ReasonInsufficientCredits:      "insufficient_credits",
	ReasonKeyLimitReached:          "key_limit_reached",
	ReasonConcurrencyLimitExceeded: "concurrency_limit_exceeded",
	ReasonRateLimitExceeded:        "rate_limit_exceeded",
	ReasonReservationSettled:       "reservation_settled",
	ReasonInvalidArgument:          "invalid_argument",
	ReasonAlreadyExists:            "already_exists",
	ReasonModelNotAllowed:          "model_not_allowed",
	ReasonInUse:                    "in_use",
}

func (r Reason) String() string {
	if s, ok := reasonNames[r]; ok {
		return s
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// ConcurrencyRetryAfter is the Retry-After, in seconds, of a full in-flight pool.
const ConcurrencyRetryAfter = 5

// Refusal is a typed refusal: the operation was not carried out and changed nothing.
type Refusal struct {
	Reason Reason
	// RetryAfter is the number of seconds to wait (> 0) for refusals that have a window:
	// the end of the minute or UTC day/month, or ConcurrencyRetryAfter.
	RetryAfter int
	// Limit names which limit was hit: "daily", "monthly", "general", "high_cost", "rpm".
	Limit string
	// Available is the account's available micro-credits (balance less holds) of an
	// insufficient-credits refusal, when the refusing side said; nil otherwise.
	Available *Micros
	Detail    string
}

func (r *Refusal) Error() string {
	s := "refused: " + r.Reason.String()
	if r.Limit != "" {
		s += " (" + r.Limit + ")"
	}
	if r.Detail != "" {
		s += ": " + r.Detail
	}
	return s
}

// Is makes errors.Is(err, &Refusal{Reason: R}) match any refusal with reason R.
func (r *Refusal) Is(target error) bool {
	t, ok := target.(*Refusal)
	return ok && t.Reason == r.Reason
}

// Refuse builds a Refusal.
func Refuse(reason Reason, detail string) *Refusal { return &Refusal{Reason: reason, Detail: detail} }

// ReasonOf returns the refusal reason of err, or 0 when err is not a Refusal.
func ReasonOf(err error) Reason {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return 0
}
