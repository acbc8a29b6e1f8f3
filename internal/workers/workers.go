// Package workers runs functions on goroutines that are kept and reused. A new goroutine
// starts with a small stack, and one whose calls go deep (a gRPC call, a trace, a
// retry loop) grows it by copying, again for every function it runs: on a hot path of
// one short-lived goroutine per request that copying shows in profiles. A kept
// goroutine grows its stack once and runs function after function on it.
//
// It imports nothing of the gateway.
package workers

import "sync/atomic"

// Pool runs functions on at most Max kept goroutines; when none is idle, a function
// gets a goroutine of its own, as with the go statement. A function never waits for a
// worker. Kept goroutines live as long as the process. The zero value is not usable:
// use New.
type Pool struct {
	max   int32
	kept  atomic.Int32
	ready chan func()
}

// New returns a Pool that keeps at most max goroutines (max ≤ 0: none; every function
// gets a goroutine of its own).
func New(max int) *Pool {
	return &Pool{max: int32(max), ready: make(chan func())}
}

// Go runs f on an idle kept goroutine, a new kept one, or one of its own.
func (p *Pool) Go(f func()) {
	select {
	case p.ready <- f:
		return
	default:
	}
	if p.kept.Add(1) <= p.max {
		go p.keep(f)
		return
	}
	p.kept.Add(-1)
	go f()
}

// keep runs f, then every function handed to it, for ever.
func (p *Pool) keep(f func()) {
	for {
		f()
		f = <-p.ready
	}
}
