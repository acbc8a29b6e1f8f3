package server

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// refusalMapping is how one domain refusal reaches the wire.
type refusalMapping struct {
	code   codes.Code
	reason accountingv1.Reason
}

// refusals is the one table from domain refusal reasons to gRPC status codes and wire
// reasons. Codes follow the gRPC guidance: a caller-fixable request is InvalidArgument;
// a state the caller must change first (top up, unsuspend, a settled reservation) is
// FailedPrecondition or PermissionDenied; a limit that frees up with time is
// ResourceExhausted, with the retry-after in the detail.
var refusals = map[ledger.Reason]refusalMapping{
	ledger.ReasonInvalidAPIKey:            {codes.Unauthenticated, accountingv1.Reason_REASON_INVALID_API_KEY},
	ledger.ReasonAccountSuspended:         {codes.PermissionDenied, accountingv1.Reason_REASON_ACCOUNT_SUSPENDED},
	ledger.ReasonInsufficientCredits:      {codes.FailedPrecondition, accountingv1.Reason_REASON_INSUFFICIENT_CREDITS},
	ledger.ReasonKeyLimitReached:          {codes.ResourceExhausted, accountingv1.Reason_REASON_KEY_LIMIT_REACHED},
	ledger.ReasonConcurrencyLimitExceeded: {codes.ResourceExhausted, accountingv1.Reason_REASON_CONCURRENCY_LIMIT_EXCEEDED},
	ledger.ReasonRateLimitExceeded:        {codes.ResourceExhausted, accountingv1.Reason_REASON_RATE_LIMIT_EXCEEDED},
	ledger.ReasonReservationSettled:       {codes.FailedPrecondition, accountingv1.Reason_REASON_RESERVATION_SETTLED},
	ledger.ReasonInvalidArgument:          {codes.InvalidArgument, accountingv1.Reason_REASON_INVALID_ARGUMENT},
	ledger.ReasonAlreadyExists:            {codes.AlreadyExists, accountingv1.Reason_REASON_ALREADY_EXISTS},
}

// refusedStatus builds a status carrying a Refusal detail.
func refusedStatus(code codes.Code, msg string, r *accountingv1.Refusal) error {
	st, err := status.New(code, msg).WithDetails(r)
	if err != nil {
		// Only fails for a nil or unmarshalable detail, which cannot happen here; the
		// plain status still carries the right code.
		return status.New(code, msg).Err()
	}
	return st.Err()
}

// invalidArgument refuses a malformed request before it reaches the store.
func invalidArgument(msg string) error {
	return refusedStatus(codes.InvalidArgument, msg,
		&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_INVALID_ARGUMENT})
}

// toStatus maps a store error to the status the caller sees. Refusals and ErrNotFound
// carry a Refusal detail; ledger.ErrBusy becomes Unavailable; anything else becomes a
// generic Internal error whose cause is logged here and never sent.
func toStatus(ctx context.Context, log *zap.Logger, method string, err error) error {
	var r *ledger.Refusal
	switch {
	case errors.As(err, &r):
		m, ok := refusals[r.Reason]
		if !ok {
			break
		}
		retry := r.RetryAfter
		if retry < 0 {
			retry = 0
		}
		return refusedStatus(m.code, r.Error(), &accountingv1.Refusal{
			Reason:            m.reason,
			RetryAfterSeconds: int32(min(retry, 1<<30)),
			Limit:             r.Limit,
		})
	case errors.Is(err, ledger.ErrNotFound):
		return refusedStatus(codes.NotFound, "not found",
			&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_NOT_FOUND})
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return status.Error(codes.Canceled, "canceled")
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, ledger.ErrBusy):
		// No Refusal detail: callers retry it like an unreachable accounting (a settlement
		// must be retried until it lands; Reserve already became a concurrency refusal).
		return status.Error(codes.Unavailable, "account busy; nothing changed, retry")
	}
	log.Error("accounting call failed", zap.String("method", method), zap.Error(err))
	return status.Error(codes.Internal, "internal error")
}
