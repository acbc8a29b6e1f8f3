package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/engine/codec"
	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/engine/machine"
)

// batch is what one journal append makes durable: the events decided for its
// operations, numbered from first, and the operations to answer once they are durable.
type batch struct {
	first  int64
	events []machine.Event
	ops    []*op
	// settling says every operation is a settlement (commit, release, renewal,
	// expiry): nobody waits for it on a client's path, so it may ride the next flush.
	settling bool
	born     time.Time
	// snapshot, when set, is the state at the batch's last seq, saved once it is durable.
	snapshot *machine.Capture
}

// own is the owner's life: the decide loop, the flusher and the lease renewal.
func (e *Engine) own(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.durable.Store(e.seq)
	e.owning.Store(true)
	e.takeovers.Add(1)
	e.markKnown()
	if e.onTakeover != nil {
		e.onTakeover(e.epoch)
	}
	e.log.Info("ledger owner", zap.String("owner", e.name), zap.Int64("epoch", e.epoch), zap.Int64("seq", e.seq))

	flush := make(chan *batch)
	flushed := make(chan error, 1)
	go e.flusher(ctx, flush, flushed)
	renewErr := make(chan error, 1)
	go func() { renewErr <- e.renew(ctx) }()
	forget := time.NewTicker(e.opts.ForgetEvery)
	defer forget.Stop()

	var cur *batch
	if e.opts.TakeoverGrace > 0 {
		cur = e.decide(nil, &op{cmd: machine.GraceLapsed{Grace: e.opts.TakeoverGrace, At: e.now()}, done: make(chan struct{})})
	}
	inflight := false
	// wake, when set, fires when a deferred flush is due.
	var wake <-chan time.Time
	stop := func(err error) error {
		e.stopOwning(err)
		e.answerAll(cur, ErrStopped)
		for {
			select {
			case o := <-e.ops:
				o.ans.Err = ErrStopped
				close(o.done)
			default:
				if inflight {
					<-flushed
				}
				if errors.Is(err, context.Canceled) {
					// Stopped on purpose: hand the lease over now rather than when it lapses.
					rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
					if rerr := e.j.Release(rctx, e.epoch); rerr != nil {
						e.log.Warn("ledger lease not released", zap.Error(rerr))
					}
					cancel()
				}
				return err
			}
		}
	}
	for {
		select {
		case o := <-e.ops:
			cur = e.decide(cur, o)
		case err := <-flushed:
			inflight = false
			if err != nil {
				return stop(err)
			}
		case err := <-renewErr:
			return stop(err)
		case <-forget.C:
			cur = e.decide(cur, &op{cmd: machine.Forget{Before: e.now().Add(-e.opts.ForgetAfter), At: e.now()}, done: make(chan struct{})})
		case <-wake:
			wake = nil
		case <-ctx.Done():
			return stop(ctx.Err())
		}
	drain:
		for n := 0; n < e.opts.MaxBatch; n++ {
			select {
			case o := <-e.ops:
				cur = e.decide(cur, o)
			default:
				break drain
			}
		}
		if cur == nil || inflight {
			continue
		}
		if time.Now().UnixNano() > e.leaseEnd.Load() {
			// The lease ran out here (a pause, a slow database): renew it before
			// anything more is answered. Nobody took over if the epoch is still ours.
			if err := e.renewNow(ctx); errors.Is(err, errFenced) {
				return stop(err)
			} else if err != nil {
				e.log.Warn("ledger lease ran out and is not renewed yet; holding answers", zap.Error(err))
				wake = time.After(min(100*time.Millisecond, e.opts.Lease/10))
				continue
			}
		}
		if cur.settling && len(cur.events) > 0 {
			// Only settlements: let them ride the next flush (a reserve's, or this
			// one's when SettleDelay has passed): one append a request at low load.
			if due := cur.born.Add(e.opts.SettleDelay); time.Now().Before(due) {
				if wake == nil {
					wake = time.After(time.Until(due))
				}
				continue
			}
		}
		if len(cur.events) == 0 {
			// Nothing to make durable, and everything decided before is: answer now.
			e.answerAll(cur, nil)
			cur = nil
			continue
		}
		if since := e.seq - e.snap; since >= e.opts.SnapshotEvery && since >= int64(e.state.Reservations()) &&
			e.saving.CompareAndSwap(false, true) {
			// The capture is all the loop pays; the snapshot is made and saved once the
			// batch is durable, one at a time (a save still running defers the next).
			c := e.state.Capture()
			cur.snapshot, e.snap = &c, e.seq
		}
		flush <- cur
		cur, inflight = nil, true
	}
}

// decide decides o against the state and adds it to cur (a new batch when nil). An
// operation whose caller's context ended (its deadline passed while it queued: a
// paused process, a slow journal) is answered with the context's error and not
// decided: its caller has given up, and a hold it would make could only tie up the
// balance and the in-flight slots until it expires.
func (e *Engine) decide(cur *batch, o *op) *batch {
	if o.ctx != nil && o.ctx.Err() != nil {
		o.ans = machine.Answer{Err: o.ctx.Err()}
		close(o.done)
		e.lateRefused.Add(1)
		return cur
	}
	if cur == nil {
		cur = &batch{first: e.seq + 1, settling: true, born: time.Now()}
	}
	switch o.cmd.(type) {
	case machine.Commit, machine.Release, machine.Renew, machine.ExpireDue, machine.Forget, machine.GraceLapsed:
	default:
		cur.settling = false
	}
	var before any
	if o.audit != nil {
		before = e.recordBefore(o.cmd, e.now())
	}
	ans, events := e.state.Decide(o.cmd)
	events = e.audited(o, before, ans, events)
	switch o.cmd.(type) {
	case machine.Reserve, machine.Commit, machine.Release:
		e.opsDecided.Add(1)
	}
	o.ans = ans
	cur.ops = append(cur.ops, o)
	cur.events = append(cur.events, events...)
	e.seq += int64(len(events))
	return cur
}

// answerAll answers b's operations; err, when set, replaces their answers.
func (e *Engine) answerAll(b *batch, err error) {
	if b == nil {
		return
	}
	if err != nil && b.snapshot != nil {
		// Never saved: the next owner's loop may capture again.
		b.snapshot = nil
		e.saving.Store(false)
	}
	for _, o := range b.ops {
		if err != nil {
			o.ans = machine.Answer{Err: err}
		}
		close(o.done)
	}
}

// flusher appends each batch it is handed, answers its operations once it is durable,
// and reports on flushed. A failed append fails its operations and is the last.
func (e *Engine) flusher(ctx context.Context, in <-chan *batch, flushed chan<- error) {
	var buf []byte
	var recs []journal.Record
	for {
		var b *batch
		select {
		case b = <-in:
		case <-ctx.Done():
			return
		}
		buf, recs = buf[:0], recs[:0]
		var err error
		for i, ev := range b.events {
			start := len(buf)
			if buf, err = codec.Encode(buf, ev); err != nil {
				break
			}
			recs = append(recs, journal.Record{Seq: b.first + int64(i), Body: buf[start:len(buf):len(buf)]})
		}
		if err == nil {
			err = e.j.Append(ctx, e.epoch, recs)
		}
		if err != nil {
			switch {
			case errors.Is(err, journal.ErrFenced):
				err = errFenced
			case ctx.Err() == nil:
				e.appendErrors.Add(1)
			}
			e.answerAll(b, ErrStopped)
			flushed <- fmt.Errorf("journal append of seq %d..%d: %w", b.first, b.first+int64(len(b.events))-1, err)
			return
		}
		e.appends.Add(1)
		e.appended.Add(int64(len(recs)))
		e.durable.Store(b.first + int64(len(b.events)) - 1)
		e.answerAll(b, nil)
		if changesCaches(b.events) {
			e.hurryMaterializer()
		}
		if b.snapshot != nil {
			go e.saveSnapshot(ctx, b.first+int64(len(b.events))-1, b.snapshot)
		}
		flushed <- nil
	}
}

// renew keeps the lease, and returns when it is lost or cannot be renewed before it
// runs out.
func (e *Engine) renew(ctx context.Context) error {
	every := e.opts.Lease / 4
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		switch err := e.renewNow(ctx); {
		case errors.Is(err, errFenced):
			return err
		case err != nil && ctx.Err() == nil:
			// The loop holds answers once the lease ran out, until a renewal lands.
			e.log.Warn("ledger lease renewal failed; retrying", zap.Error(err))
		}
	}
}

// renewNow renews the lease once; errFenced when another owner took over.
func (e *Engine) renewNow(ctx context.Context) error {
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, e.opts.Lease/2)
	defer cancel()
	if _, err := e.j.Renew(rctx, e.epoch, e.opts.Lease); err != nil {
		if errors.Is(err, journal.ErrFenced) {
			return errFenced
		}
		return err
	}
	e.heard()
	// No later than the lease's end as the database counts it: it counts from when it
	// received the renewal, after it was sent.
	for {
		old := e.leaseEnd.Load()
		if end := sent.Add(e.opts.Lease).UnixNano(); end <= old || e.leaseEnd.CompareAndSwap(old, end) {
			return nil
		}
	}
}

// changesCaches reports whether events change what extproc caches about a key or an
// account (the change feed comes from the derived tables), or raise an alert (its
// webhook is queued by the materializer): a revoked key must stop working now, and an
// alert go out now, not at the materializer's next pass.
func changesCaches(events []machine.Event) bool {
	for _, ev := range events {
		switch ev.(type) {
		case machine.KeyChanged, machine.AccountSuspended, machine.ToppedUp, machine.TierPut,
			machine.ProjectChanged, machine.ProjectDeleted, machine.KeyPlaced, machine.Alerted:
			return true
		}
	}
	return false
}
