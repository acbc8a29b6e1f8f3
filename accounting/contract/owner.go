package contract

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// RedirectHeader is the metadata a caller sends ("1") to be told where the ledger's
// owner is rather than have a standby forward its call there: the standby answers
// NotOwnerStatus, nothing decided, and the caller calls the owner itself.
const RedirectHeader = "x-ledger-redirect"

// NotOwnerStatus is the answer of a process that does not own the ledger, when the
// owner is known to be at addr: UNAVAILABLE (callers that know nothing of redirects
// retry it as an unreachable accounting) with an accountingv1.NotOwner detail.
func NotOwnerStatus(addr string) error {
	st := status.New(codes.Unavailable, "not the ledger owner; the owner is at "+addr)
	if d, err := st.WithDetails(&accountingv1.NotOwner{OwnerAddr: addr}); err == nil {
		st = d
	}
	return st.Err()
}

// OwnerOf is the owner's address a NotOwnerStatus names; ok is false for any other
// error.
func OwnerOf(err error) (addr string, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.Unavailable {
		return "", false
	}
	for _, d := range st.Details() {
		if n, isNotOwner := d.(*accountingv1.NotOwner); isNotOwner && n.GetOwnerAddr() != "" {
			return n.GetOwnerAddr(), true
		}
	}
	return "", false
}
