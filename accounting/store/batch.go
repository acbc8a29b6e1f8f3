package store

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/internal/opqueue"
	"github.com/llmgw/gateway/internal/workers"
)

// Group commit. Reserve, Commit and Release queue their operation for the Store's writer
// instead of each running its own transaction. The writer takes whatever is queued (at
// most Options.MaxBatch operations), decides it all in one transaction (one WAL flush)
// and answers each caller; while that transaction is in flight, the next batch forms in
// the queue. No timer: an operation that finds the writer idle is sent at once, so a
// lone request waits for nothing. A small batch runs its operations' PL/pgSQL functions
// one after another in one round trip (lone.go); a larger one is locked and read in one
// round trip, decided in Go and written set-based in another (group_read.go,
// group_decide.go, group_write.go).
//
// Each operation decides exactly as its PL/pgSQL function would alone, refusals are
// outcomes that change nothing. A batch waits for an account row another transaction
// holds for writerLockWait at most (taking its accounts in id order: lockorder.go), then
// fails whole; an operation of a large batch whose reservation row another transaction
// holds is answered "deferred": its caller then runs it alone, through the account gate,
// as without group commit. When the batch's transaction fails, it changed nothing and
// every caller runs its operation alone; when it fails after the database committed it
// (connection lost), running alone replays it, since every operation is idempotent
// (request id, reservation id).

// DefaultMaxBatch is the most operations one group-commit transaction decides when
// Options.MaxBatch is zero.
const DefaultMaxBatch = 128

// DefaultLoneBatch is the largest batch run as its operations' PL/pgSQL functions when
// Options.LoneBatch is zero (see run).
const DefaultLoneBatch = 4

type opKind int16

const (
	opReserve opKind = 1
	opCommit  opKind = 2
	opRelease opKind = 3
)

// batchOp is one queued operation and the channel its answer comes back on.
type batchOp struct {
	kind    opKind
	now     *time.Time
	reserve ledger.ReserveRequest // opReserve, TTL defaulted
	commit  ledger.CommitRequest  // opCommit
	resID   string                // opRelease
	reason  string                // opRelease

	// A caller that gives up takes its queued operation back, so the writer never sends
	// an operation nobody waits for; once taken, it is decided.
	ticket opqueue.Ticket
	done   chan opAnswer
}

func ticketOf(op *batchOp) *opqueue.Ticket { return &op.ticket }

// opAnswer is the writer's answer: the outcome, or alone when the caller must run the
// operation in a transaction of its own.
type opAnswer struct {
	out   opOutcome
	alone bool
}

// opOutcome is what one of ledger_reserve, ledger_commit or ledger_release returned (the
// columns its kind has; the rest stay nil).
type opOutcome struct {
	outcome                   string
	limit                     *string
	retryAfter                *int32
	id, account, keyID, model *string
	amount, charged           *int64
	pool                      *int16
	state                     *string
	capped                    *bool
	created, expires          *time.Time
}

// batcher is the queue and its single writer, which runs only while there is work.
type batcher struct {
	s         *Store
	max, lone int

	stats groupCounters

	mu      sync.Mutex
	queue   []*batchOp
	running bool
}

// grouped decides op through group commit. ok is false when the caller must run the
// operation alone (group commit off, the operation's rows held elsewhere, or the batch
// failed); err is set only when ctx ended first, and then the operation may or may not
// have been applied (as with a statement whose caller gives up).
func (s *Store) grouped(ctx context.Context, op *batchOp) (o opOutcome, ok bool, err error) {
	if s.batch == nil {
		return opOutcome{}, false, nil
	}
	op.done = make(chan opAnswer, 1)
	s.batch.submit(op)
	select {
	case a := <-op.done:
		return a.out, !a.alone, nil
	case <-ctx.Done():
		op.ticket.Abandon()
		return opOutcome{}, true, dbError(opName(op.kind), ctx.Err())
	}
}

func opName(k opKind) string {
	switch k {
	case opReserve:
		return "reserve"
	case opCommit:
		return "commit"
	}
	return "release"
}

func (b *batcher) submit(op *batchOp) {
	b.mu.Lock()
	b.queue = append(b.queue, op)
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start {
		writers.Go(b.write)
	}
}

// writers run the Stores' writers. A writer runs while operations are queued and stops
// when none is (at low load, once per operation); on a goroutine of its own each time,
// its stack grew again in pgx for every batch (runtime.newstack ≈4–7 % of accounting's
// CPU at 1,000 requests/s); a kept goroutine grows it once.
var writers = workers.New(8)

// write runs batches until the queue is empty, then stops. Before its first batch it
// yields once, so that goroutines that became runnable together with it (the other
// operations of one Apply) queue theirs first, instead of the first operation going
// alone and the rest in a second transaction after it.
func (b *batcher) write() {
	runtime.Gosched()
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.running = false
			b.queue = nil
			b.mu.Unlock()
			return
		}
		var batch []*batchOp
		batch, b.queue = opqueue.Take(b.queue, b.max, ticketOf)
		b.mu.Unlock()
		if len(batch) > 0 {
			b.run(batch)
		}
	}
}

// run decides batch in one transaction and answers every operation of it. A small batch
// (at most Options.LoneBatch operations) runs its operations' PL/pgSQL functions in one
// round trip (decideLone); a larger one is decided in Go and written set-based in two
// (decide). Each statement costs PostgreSQL about the same for one operation as for
// many, so the set-based path pays only once a batch is large enough to share them. In
// BenchmarkReserveCommit, spread/few (4 callers: batches of 2–4) costs PostgreSQL about
// the same either way and accounting less through the functions; with 8 callers
// (batches of 4–8) the functions cost PostgreSQL ≈20 % more, with 32 twice as much.
func (b *batcher) run(batch []*batchOp) {
	b.stats.transactions.Add(1)
	b.stats.operations.Add(int64(len(batch)))
	decide := b.s.decide
	if len(batch) <= b.lone {
		decide = b.s.decideLone
	}
	outs, err := decide(batch)
	for i, op := range batch {
		if err != nil || outs[i].outcome == "deferred" {
			b.stats.alone.Add(1)
			op.done <- opAnswer{alone: true}
			continue
		}
		op.done <- opAnswer{out: outs[i]}
	}
}

// GroupStats counts what group commit did since the Store was opened: the transactions
// its writer ran (a batch of one included), the operations they carried, and those of
// them sent back to run alone (rows held elsewhere, a failed transaction). Operations
// per transaction is the batching under the current load.
type GroupStats struct {
	Transactions, Operations, Alone int64
}

type groupCounters struct{ transactions, operations, alone atomic.Int64 }

// GroupStats returns the group-commit counters; all zero when group commit is off.
func (s *Store) GroupStats() GroupStats {
	if s.batch == nil {
		return GroupStats{}
	}
	c := &s.batch.stats
	return GroupStats{Transactions: c.transactions.Load(), Operations: c.operations.Load(), Alone: c.alone.Load()}
}

// decide runs batch in one transaction (group.go) and returns one outcome per
// operation, in order. Its context is not any caller's: one caller giving up never cuts
// a batch short.
func (s *Store) decide(batch []*batchOp) (outs []opOutcome, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.StatementTimeout+s.opts.LockTimeout)
	defer cancel()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, dbError("group commit", err)
	}
	defer conn.Release()
	// Two round trips: BEGIN travels with the reads and COMMIT with the writes. When
	// anything fails the transaction is rolled back before the connection goes back to
	// the pool (which would close a connection left inside a transaction).
	defer func() {
		if err != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), s.opts.LockTimeout)
			defer rcancel()
			_, _ = conn.Exec(rctx, "ROLLBACK")
		}
	}()
	st, err := readGroup(ctx, conn, batch, s.writerLockWait)
	if err != nil {
		return nil, dbError("group commit", err)
	}
	outs = make([]opOutcome, len(batch))
	for i, op := range batch {
		outs[i] = st.decide(op)
	}
	if err := writeGroup(ctx, conn, st, batch, outs); err != nil {
		return nil, dbError("group commit", err)
	}
	return outs, nil
}
