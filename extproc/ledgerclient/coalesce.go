package ledgerclient

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/internal/opqueue"
	"github.com/llmgw/gateway/internal/workers"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Coalescing. Reserve, Commit and Release go to accounting as calls of their own while
// fewer than Options.MaxInFlight are in flight; beyond that they queue, and when a call
// in flight comes back, everything queued goes as one Apply (at most contract.MaxApplyOps). No
// timer makes an operation wait for others: at low load every call is its own, and under
// load one round trip and one server-side handling carry many operations, which
// accounting's group commit then decides in one transaction. Each operation is still decided alone (Apply's contract);
// a caller that gives up takes a queued operation back, so an Apply never carries an
// operation nobody waits for.
//
// A call that has been in flight for Options.StaleAfter (default 10 ms) no longer holds
// its slot: what queued behind it goes at once. So one slow operation (its account's
// rows held by another transaction, an account busy with contention) delays the others
// of this process by that much at most, never by its own wait: one tenant's contention
// does not stall the others' requests.
//
// An operation whose context carries a trace is always a call of its own, so that its
// span and trace context reach accounting. An accounting that does not know Apply (an
// older version during a rolling upgrade) answers Unimplemented: from then on every
// operation is a call of its own.

// DefaultMaxInFlight is Options.MaxInFlight's default. With one call in flight, every
// operation made meanwhile waited for it to come back before going out (the whole of a
// group-commit transaction under load): six alternated load-test runs at 1,000 requests/s,
// one against four, added p50 ≈6.6 → ≈4.9 ms and p99 ≈21 → ≈17 ms (medians), for ≈12 %
// more CPU in extproc, accounting and PostgreSQL (accounting's batches are smaller:
// ≈4.4 → ≈2.4 operations a transaction); at 500 requests/s and below, the same CPU.
const DefaultMaxInFlight = 4

// DefaultStaleAfter is Options.StaleAfter's default: several times what a call takes
// under load (a group-commit transaction), and the writer's own wait for a row lock.
const DefaultStaleAfter = 10 * time.Millisecond

// defaultApplyTimeout bounds an Apply whose operations have no deadline.
const defaultApplyTimeout = 30 * time.Second

// queuedOp is one operation waiting for an Apply, and where its result goes.
type queuedOp struct {
	ctx    context.Context
	op     *accountingv1.LedgerOp
	ticket opqueue.Ticket
	done   chan opResult
}

func ticketOf(q *queuedOp) *opqueue.Ticket { return &q.ticket }

type opResult struct {
	res *accountingv1.LedgerOpResult
	err error
}

// applyWorkers runs the Applies of every coalescer of the process on kept goroutines
// (one per slot in flight: MaxInFlight, and the slots of calls gone stale); more at once
// run on goroutines of their own.
var applyWorkers = workers.New(8)

// coalescer sends ledger operations as their own calls or in Applies.
type coalescer struct {
	rpc        accountingv1.LedgerServiceClient
	limit      int           // calls in flight before operations queue; < 1: never queue
	staleAfter time.Duration // a call in flight this long no longer holds its slot
	log        *zap.Logger

	noApply atomic.Bool // accounting answered Apply with Unimplemented

	mu       sync.Mutex
	inFlight int
	queue    []*queuedOp
}

// do sends op and returns what accounting answered for it: the result (an error
// result for a refused operation) or the error of the call that carried it.
func (c *coalescer) do(ctx context.Context, op *accountingv1.LedgerOp) (*accountingv1.LedgerOpResult, error) {
	if c.limit < 1 || c.noApply.Load() || trace.SpanContextFromContext(ctx).IsValid() {
		return c.own(ctx, op)
	}
	c.mu.Lock()
	if c.inFlight < c.limit {
		c.inFlight++
		c.mu.Unlock()
		s := c.hold()
		res, err := c.own(ctx, op)
		c.done(s)
		return res, err
	}
	q := &queuedOp{ctx: ctx, op: op, done: make(chan opResult, 1)}
	c.queue = append(c.queue, q)
	c.mu.Unlock()
	select {
	case r := <-q.done:
		return r.res, r.err
	case <-ctx.Done():
		// Taken back if still queued; otherwise an Apply carries it and accounting may
		// still apply it, as with a call of its own whose caller gives up.
		q.ticket.Abandon()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// slot is one call in flight's hold on its place among the limit. It is handed over to
// the queue once: when the call comes back, or when it has been in flight for
// staleAfter, whichever comes first.
type slot struct {
	timer *time.Timer
	over  atomic.Bool
}

// hold starts a slot's clock; the caller has counted it in inFlight.
func (c *coalescer) hold() *slot {
	s := &slot{}
	s.timer = time.AfterFunc(c.staleAfter, func() { c.handOver(s) })
	return s
}

// done hands the slot of a call that came back over, unless its time already had.
func (c *coalescer) done(s *slot) {
	s.timer.Stop()
	c.handOver(s)
}

// handOver gives a slot to what is queued, as an Apply of its own, or frees it.
func (c *coalescer) handOver(s *slot) {
	if !s.over.CompareAndSwap(false, true) {
		return
	}
	if batch := c.take(); batch != nil {
		applyWorkers.Go(func() { c.run(batch) })
	}
}

// take hands a slot that came free to the queue: the operations queued (at most
// contract.MaxApplyOps) that nobody abandoned, or nil when there are none and the slot is free.
func (c *coalescer) take() []*queuedOp {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) > 0 {
		var batch []*queuedOp
		batch, c.queue = opqueue.Take(c.queue, contract.MaxApplyOps, ticketOf)
		if len(batch) > 0 {
			return batch
		}
	}
	c.queue = nil
	c.inFlight--
	return nil
}

// run sends batch as one Apply in the slot it was handed.
func (c *coalescer) run(batch []*queuedOp) {
	s := c.hold()
	c.apply(batch)
	c.done(s)
}

// apply sends batch as one Apply and answers each operation.
func (c *coalescer) apply(batch []*queuedOp) {
	if c.noApply.Load() {
		c.each(batch)
		return
	}
	ctx, cancel := applyContext(batch)
	defer cancel()
	req := &accountingv1.ApplyRequest{Ops: make([]*accountingv1.LedgerOp, len(batch))}
	for i, q := range batch {
		req.Ops[i] = q.op
	}
	resp, err := c.rpc.Apply(ctx, req)
	switch {
	case status.Code(err) == codes.Unimplemented:
		if !c.noApply.Swap(true) {
			c.log.Warn("accounting does not know Apply: every ledger operation is a call of its own")
		}
		c.each(batch)
		return
	case err == nil && len(resp.GetResults()) != len(batch):
		err = status.Errorf(codes.Internal, "accounting answered %d results for %d operations", len(resp.GetResults()), len(batch))
	}
	for i, q := range batch {
		if err != nil {
			q.done <- opResult{err: err}
			continue
		}
		q.done <- opResult{res: resp.GetResults()[i]}
	}
}

// each sends every operation of batch as a call of its own, at once.
func (c *coalescer) each(batch []*queuedOp) {
	var wg sync.WaitGroup
	for _, q := range batch {
		wg.Go(func() {
			res, err := c.own(q.ctx, q.op)
			q.done <- opResult{res: res, err: err}
		})
	}
	wg.Wait()
}

// applyContext is the context of an Apply: no caller's (one giving up cuts no other
// short), with the earliest of the operations' deadlines. One answer carries every
// operation's result, so it comes when the slowest is decided; accounting ends each
// wait for an account before the call's deadline (a locked account's Reserve is then
// refused as busy), so with the earliest deadline every caller has its answer in time.
// With the latest, an operation of a locked account kept the answer from the others
// until their callers had given up (a healthy account's request failed with 503). An
// operation whose deadline is later loses the difference only when it has to wait for
// its account.
func applyContext(batch []*queuedOp) (context.Context, context.CancelFunc) {
	earliest := time.Now().Add(defaultApplyTimeout)
	for _, q := range batch {
		if d, ok := q.ctx.Deadline(); ok && d.Before(earliest) {
			earliest = d
		}
	}
	return context.WithDeadline(context.Background(), earliest)
}

// own sends op as a call of its own method.
func (c *coalescer) own(ctx context.Context, op *accountingv1.LedgerOp) (*accountingv1.LedgerOpResult, error) {
	switch v := op.GetOp().(type) {
	case *accountingv1.LedgerOp_Reserve:
		r, err := c.rpc.Reserve(ctx, v.Reserve)
		if err != nil {
			return nil, err
		}
		return &accountingv1.LedgerOpResult{Result: &accountingv1.LedgerOpResult_Reserve{Reserve: r}}, nil
	case *accountingv1.LedgerOp_Commit:
		r, err := c.rpc.Commit(ctx, v.Commit)
		if err != nil {
			return nil, err
		}
		return &accountingv1.LedgerOpResult{Result: &accountingv1.LedgerOpResult_Commit{Commit: r}}, nil
	case *accountingv1.LedgerOp_Release:
		r, err := c.rpc.Release(ctx, v.Release)
		if err != nil {
			return nil, err
		}
		return &accountingv1.LedgerOpResult{Result: &accountingv1.LedgerOpResult_Release{Release: r}}, nil
	}
	return nil, status.Error(codes.Internal, "ledger operation of no known kind")
}

// EachOperation calls f with the method of every ledger operation one accounting call
// carries, for those who time calls by method: each operation of an Apply by its own
// method ("Reserve", "Commit", "Release"), any other call by its own (the last element
// of fullMethod). An operation is thereby counted once whichever way it went.
func EachOperation(fullMethod string, req any, f func(method string)) {
	a, ok := req.(*accountingv1.ApplyRequest)
	if !ok {
		f(fullMethod[strings.LastIndexByte(fullMethod, '/')+1:])
		return
	}
	for _, op := range a.GetOps() {
		switch op.GetOp().(type) {
		case *accountingv1.LedgerOp_Reserve:
			f("Reserve")
		case *accountingv1.LedgerOp_Commit:
			f("Commit")
		case *accountingv1.LedgerOp_Release:
			f("Release")
		}
	}
}
