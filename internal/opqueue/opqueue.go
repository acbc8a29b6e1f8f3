// Package opqueue is the queue of operations that one consumer takes in batches while
// their callers wait, any of whom may give up and take its operation back as long as
// the consumer has not taken it: so a batch never carries an operation nobody waits
// for, and a caller whose operation was taken knows it may have been applied.
// Accounting's group commit (the store's writer) and extproc's coalescing of ledger
// calls are built on it; each keeps its own slice and lock.
//
// It imports nothing of the gateway.
package opqueue

import "sync/atomic"

const (
	queued int32 = iota
	taken
	abandoned
)

// Ticket is an operation's place in a queue: queued, then taken by the consumer or
// abandoned by its caller, whichever comes first. The zero value is queued. Safe for
// concurrent use.
type Ticket struct{ state atomic.Int32 }

// Abandon takes the operation back; false when the consumer took it first.
func (t *Ticket) Abandon() bool { return t.state.CompareAndSwap(queued, abandoned) }

// Take removes the first max operations (at most) from queue and returns those of them
// that were not abandoned, now taken, and the rest of the queue. The batch is empty
// when all were abandoned (or queue is), while the rest may not be. The removed
// elements of queue are cleared, so the queue keeps no pointer to them.
func Take[T any](queue []T, max int, ticket func(T) *Ticket) (batch, rest []T) {
	n := min(len(queue), max)
	batch = make([]T, 0, n)
	for _, op := range queue[:n] {
		if ticket(op).state.CompareAndSwap(queued, taken) {
			batch = append(batch, op)
		}
	}
	clear(queue[:n])
	return batch, queue[n:]
}
