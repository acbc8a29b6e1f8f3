package client

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// MaxApplyOps is the most operations one Apply may carry (the contract's limit: accounting
// refuses more, callers send no more).
const MaxApplyOps = 256

// OpErrorOf is the OpError an Apply result carries for err, the status the operation's
// own call would have failed with: its code, message and Refusal detail. A status
// without a code (or a plain error) becomes Unknown, as grpc-go would send it.
func OpErrorOf(err error) *accountingv1.OpError {
	st := status.Convert(err)
	code := st.Code()
	if code == codes.OK {
		code = codes.Unknown
	}
	e := &accountingv1.OpError{Code: int32(code), Message: st.Message()}
	for _, d := range st.Details() {
		if r, ok := d.(*accountingv1.Refusal); ok {
			e.Refusal = r
			break
		}
	}
	return e
}

// OpStatus is the status error e stands for: what the operation's own call would have
// returned (its Refusal, if any, in the details).
func OpStatus(e *accountingv1.OpError) error {
	code := codes.Code(e.GetCode())
	if code == codes.OK {
		code = codes.Unknown
	}
	st := status.New(code, e.GetMessage())
	if r := e.GetRefusal(); r != nil {
		if withRefusal, err := st.WithDetails(r); err == nil {
			st = withRefusal
		}
	}
	return st.Err()
}
