package contract

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// refusal is how one domain refusal reason travels: its wire reason and the gRPC code of
// the status that carries it. Codes follow the gRPC guidance: a caller-fixable request
// is InvalidArgument; a state the caller must change first (top up, unsuspend, a settled
// reservation) is FailedPrecondition or PermissionDenied; a limit that frees up with
// time is ResourceExhausted, with the retry-after in the detail.
type refusal struct {
	reason accountingv1.Reason
	code   codes.Code
}

func reasonPair(d ledger.Reason, w accountingv1.Reason, code codes.Code) pair[ledger.Reason, refusal] {
	return pair[ledger.Reason, refusal]{d, refusal{w, code}}
}

var refusals = newEnum(
	reasonPair(ledger.ReasonInvalidAPIKey, accountingv1.Reason_REASON_INVALID_API_KEY, codes.Unauthenticated),
	reasonPair(ledger.ReasonAccountSuspended, accountingv1.Reason_REASON_ACCOUNT_SUSPENDED, codes.PermissionDenied),
	reasonPair(ledger.ReasonInsufficientCredits, accountingv1.Reason_REASON_INSUFFICIENT_CREDITS, codes.FailedPrecondition),
	reasonPair(ledger.ReasonKeyLimitReached, accountingv1.Reason_REASON_KEY_LIMIT_REACHED, codes.ResourceExhausted),
	reasonPair(ledger.ReasonConcurrencyLimitExceeded, accountingv1.Reason_REASON_CONCURRENCY_LIMIT_EXCEEDED, codes.ResourceExhausted),
	reasonPair(ledger.ReasonRateLimitExceeded, accountingv1.Reason_REASON_RATE_LIMIT_EXCEEDED, codes.ResourceExhausted),
	reasonPair(ledger.ReasonReservationSettled, accountingv1.Reason_REASON_RESERVATION_SETTLED, codes.FailedPrecondition),
	reasonPair(ledger.ReasonInvalidArgument, accountingv1.Reason_REASON_INVALID_ARGUMENT, codes.InvalidArgument),
	reasonPair(ledger.ReasonAlreadyExists, accountingv1.Reason_REASON_ALREADY_EXISTS, codes.AlreadyExists),
	reasonPair(ledger.ReasonModelNotAllowed, accountingv1.Reason_REASON_MODEL_NOT_ALLOWED, codes.PermissionDenied),
	reasonPair(ledger.ReasonInUse, accountingv1.Reason_REASON_IN_USE, codes.FailedPrecondition),
)

// reasonsByWire finds a domain reason from its wire reason alone (the code is the
// sender's business).
var reasonsByWire = func() map[accountingv1.Reason]ledger.Reason {
	m := make(map[accountingv1.Reason]ledger.Reason, len(refusals.wire))
	for d, r := range refusals.wire {
		m[r.reason] = d
	}
	return m
}()

// ReasonToProto is a domain refusal reason on the wire; ok is false for an unknown one.
func ReasonToProto(r ledger.Reason) (accountingv1.Reason, bool) {
	w, ok := refusals.toWire(r)
	return w.reason, ok
}

// ReasonFromProto is the domain refusal reason of a wire reason; ok is false for
// REASON_NOT_FOUND (which is ledger.ErrNotFound, not a refusal) and unknown values.
func ReasonFromProto(r accountingv1.Reason) (ledger.Reason, bool) {
	d, ok := reasonsByWire[r]
	return d, ok
}

// RefusalStatus is the status that carries a domain refusal or ledger.ErrNotFound, with
// a Refusal detail; ok is false for any other error (the caller decides what that
// becomes, usually Internal with the cause logged and never sent).
func RefusalStatus(err error) (st error, ok bool) {
	var r *ledger.Refusal
	switch {
	case errors.As(err, &r):
		m, known := refusals.toWire(r.Reason)
		if !known {
			return nil, false
		}
		retry := max(r.RetryAfter, 0)
		return RefusedStatus(m.code, r.Error(), &accountingv1.Refusal{
			Reason:            m.reason,
			RetryAfterSeconds: int32(min(retry, 1<<30)),
			Limit:             r.Limit,
			AvailableMicros:   r.Available,
		}), true
	case errors.Is(err, ledger.ErrNotFound):
		return RefusedStatus(codes.NotFound, "not found",
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_NOT_FOUND}), true
	}
	return nil, false
}

// RefusedStatus builds a status error carrying a Refusal detail.
func RefusedStatus(code codes.Code, msg string, r *accountingv1.Refusal) error {
	st, err := status.New(code, msg).WithDetails(r)
	if err != nil {
		// Only fails for a nil or unmarshalable detail, which cannot happen here; the
		// plain status still carries the right code.
		return status.New(code, msg).Err()
	}
	return st.Err()
}

// FromStatus turns a refused call back into the domain's error: a *ledger.Refusal (from
// the status's Refusal detail) or ledger.ErrNotFound. Any other error, and a status
// whose reason this side does not know, is returned as it is.
func FromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		r, ok := d.(*accountingv1.Refusal)
		if !ok {
			continue
		}
		if r.GetReason() == accountingv1.Reason_REASON_NOT_FOUND {
			return ledger.ErrNotFound
		}
		if reason, known := ReasonFromProto(r.GetReason()); known {
			return &ledger.Refusal{Reason: reason, RetryAfter: int(r.GetRetryAfterSeconds()), Limit: r.GetLimit(), Available: r.AvailableMicros}
		}
	}
	return err
}
