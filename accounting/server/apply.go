package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/internal/workers"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Apply makes each operation as its own call (Reserve, Commit or Release) would, all at
// once: the store's group commit then decides them together, in as few transactions as
// their accounts allow. An operation's failure is its result, never the Apply's.
//
// Each operation is timed as a call of its own method (Options.Observe), so that a
// call's duration by method keeps its meaning whichever way the call came.
func (l *LedgerServer) Apply(ctx context.Context, req *accountingv1.ApplyRequest) (*accountingv1.ApplyResponse, error) {
	ops := req.GetOps()
	switch {
	case len(ops) == 0:
		return nil, invalidArgument("ops is empty")
	case len(ops) > contract.MaxApplyOps:
		return nil, invalidArgument(fmt.Sprintf("ops has more than %d operations", contract.MaxApplyOps))
	}
	for _, op := range ops {
		if op.GetOp() == nil {
			return nil, invalidArgument("an operation is neither reserve, commit nor release")
		}
	}
	results := make([]*accountingv1.LedgerOpResult, len(ops))
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Add(1)
		applyWork.Go(func() {
			defer wg.Done()
			results[i] = l.applyOne(ctx, op)
		})
	}
	wg.Wait()
	return &accountingv1.ApplyResponse{Results: results}, nil
}

// applyWork runs an Apply's operations on kept goroutines, whose stacks have grown in
// earlier operations (a new goroutine's grows again in the store and pgx for each).
var applyWork = workers.New(64)

// applyOne makes one operation of an Apply through its own call's handler.
func (l *LedgerServer) applyOne(ctx context.Context, op *accountingv1.LedgerOp) *accountingv1.LedgerOpResult {
	start := time.Now()
	var (
		method string
		out    *accountingv1.LedgerOpResult
		err    error
	)
	switch v := op.GetOp().(type) {
	case *accountingv1.LedgerOp_Reserve:
		method = "Reserve"
		var r *accountingv1.ReserveResponse
		if r, err = l.Reserve(ctx, v.Reserve); err == nil {
			out = &accountingv1.LedgerOpResult{Result: &accountingv1.LedgerOpResult_Reserve{Reserve: r}}
		}
	case *accountingv1.LedgerOp_Commit:
		method = "Commit"
		var r *accountingv1.CommitResponse
		if r, err = l.Commit(ctx, v.Commit); err == nil {
			out = &accountingv1.LedgerOpResult{Result: &accountingv1.LedgerOpResult_Commit{Commit: r}}
		}
	case *accountingv1.LedgerOp_Release:
		method = "Release"
		var r *accountingv1.ReleaseResponse
		if r, err = l.Release(ctx, v.Release); err == nil {
			out = &accountingv1.LedgerOpResult{Result: &accountingv1.LedgerOpResult_Release{Release: r}}
		}
	}
	if l.s.observe != nil {
		l.s.observe(method, err, time.Since(start))
	}
	if err != nil {
		return &accountingv1.LedgerOpResult{Result: &accountingv1.LedgerOpResult_Error{Error: contract.OpErrorOf(err)}}
	}
	return out
}
