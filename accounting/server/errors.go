package server

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// invalidArgument refuses a malformed request before it reaches the store.
func invalidArgument(msg string) error {
	return contract.RefusedStatus(codes.InvalidArgument, msg,
		&accountingv1.Refusal{Reason: accountingv1.Reason_REASON_INVALID_ARGUMENT})
}

// toStatus maps a store error to the status the caller sees. Refusals and ErrNotFound
// carry a Refusal detail (contract.RefusalStatus); ledger.ErrBusy becomes Unavailable,
// a ledger.NotOwnerError that names the owner contract.NotOwnerStatus; anything else becomes a
// generic Internal error whose cause is logged here and never sent.
func toStatus(ctx context.Context, log *zap.Logger, method string, err error) error {
	if st, ok := contract.RefusalStatus(err); ok {
		return st
	}
	var notOwner *ledger.NotOwnerError
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return status.Error(codes.Canceled, "canceled")
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, ledger.ErrBusy):
		// No Refusal detail: callers retry it like an unreachable accounting (a settlement
		// must be retried until it lands; Reserve already became a concurrency refusal).
		return status.Error(codes.Unavailable, "account busy; nothing changed, retry")
	case errors.As(err, &notOwner) && notOwner.Addr != "":
		// A standby, or an owner that stopped owning: the caller may call the owner.
		return contract.NotOwnerStatus(notOwner.Addr)
	case errors.Is(err, ledger.ErrUnavailable):
		// Not the owner, or the owner stopped: retried like an unreachable accounting.
		// The message names the owner's address, never a secret.
		return status.Error(codes.Unavailable, err.Error())
	}
	log.Error("accounting call failed", zap.String("method", method), zap.Error(err))
	return status.Error(codes.Internal, "internal error")
}
