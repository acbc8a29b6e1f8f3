package ledgerclient

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/contract"
)

// Waiting for an owner. While the ledger's owner is replaced (it died; a standby takes
// over once its lease lapses) accounting answers UNAVAILABLE, and a replica that is
// paused answers nothing. waitForOwner, the unary interceptor of extproc's accounting
// connection, makes each call wait for an owner within the caller's own deadline:
//
//   - An attempt gets at most half the time left (at least MinAttempt), so that an
//     attempt stuck at a paused replica leaves time to try again elsewhere (the picker
//     then skips that replica, pick.go).
//   - UNAVAILABLE, or an attempt that ran out of its own time, is tried again after a
//     short pause (RetryPause, doubling up to MaxRetryPause) as long as the caller's
//     deadline leaves room for it.
//   - A call without a deadline is made once: its caller decides how to retry.
//
// Every ledger call may be retried this way: reads, and operations made idempotent by
// their ids (a reserve by its request id, a commit or release by its reservation id).
// The admission's time budget therefore covers a takeover of the default lease.

// MinAttempt, RetryPause and MaxRetryPause tune waitForOwner.
const (
	MinAttempt    = 300 * time.Millisecond
	RetryPause    = 10 * time.Millisecond
	MaxRetryPause = 100 * time.Millisecond
)

func waitForOwner(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	pause := RetryPause
	for {
		attempt := max(time.Until(deadline)/2, MinAttempt)
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := invoker(actx, method, req, reply, cc, opts...)
		cancel()
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded:
		default:
			return err
		}
		if _, redirected := contract.OwnerOf(err); (redirected && askedForRedirects(ctx)) || singleAttempt(ctx) {
			return err // the router follows the redirect, or falls back (route.go)
		}
		if ctx.Err() != nil || time.Until(deadline) < pause+MinAttempt/2 {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, MaxRetryPause)
	}
}

// askedForRedirects says whether the call asked for redirects (the router's calls do):
// a replica's NotOwner answer to a call that did not (a former owner woken from a
// pause, before it forwards) is waited out like any UNAVAILABLE.
func askedForRedirects(ctx context.Context) bool {
	return len(metadata.ValueFromOutgoingContext(ctx, contract.RedirectHeader)) > 0
}

// oneAttempt marks a call that waitForOwner makes once: a call at the owner the router
// learned, which falls back to round robin itself when it fails (route.go).
func oneAttempt(ctx context.Context) context.Context {
	return context.WithValue(ctx, oneAttemptKey{}, true)
}

func singleAttempt(ctx context.Context) bool { return ctx.Value(oneAttemptKey{}) != nil }

type oneAttemptKey struct{}
