package store

import (
	"context"
	"fmt"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// A caller's deadline bounds every wait for its account. A call that runs alone waits
// twice for its account: for a slot in the account gate (gate.go), then for the account
// row's lock (lock_timeout). Each wait has its own bound (Options.LockTimeout), but
// together, behind an account whose row another transaction holds for long, they
// outlasted extproc's admission budget: its Reserve then failed on its deadline (the
// client got 503) instead of answering with the concurrency refusal (429). So each wait
// also ends answerMargin before the caller's deadline (which gRPC carries from extproc),
// and a call that gives up this way fails with ledger.ErrBusy, as on a lock timeout.

// answerMargin is what a call keeps of its caller's deadline to give up, answer and
// have the answer travel back.
const answerMargin = 100 * time.Millisecond

// minWait is the shortest wait worth a statement; with less time left the call gives
// up without one (a timeout of 0 would mean no bound at all).
const minWait = time.Millisecond

// waitLeft is how long a call with ctx may still wait for its account; bounded is false
// when ctx has no deadline.
func waitLeft(ctx context.Context) (left time.Duration, bounded bool) {
	d, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return time.Until(d) - answerMargin, true
}

// errNoTimeLeft is the ErrBusy of a call whose caller's deadline leaves no time to wait.
func errNoTimeLeft(what string) error {
	return fmt.Errorf("ledger store: %w: the caller's deadline leaves no time to wait for %s", ledger.ErrBusy, what)
}
