package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/engine/codec"
	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/engine/machine"
)

// readChunk is how many records a standby folds per read.
const readChunk = 4096

// load builds the state from the newest snapshot and the journal after it. A journal
// with no snapshot yet is new: its first snapshot (seq 0) is the imported state, saved
// before any record can be appended.
func (e *Engine) load(ctx context.Context) error {
	seq, body, err := e.j.LatestSnapshot(ctx)
	if err != nil {
		return err
	}
	if body == nil {
		last, err := e.j.Last(ctx)
		if err != nil {
			return err
		}
		if last != 0 {
			return fmt.Errorf("the journal holds records up to seq %d but no snapshot", last)
		}
		sn := machine.Snapshot{}
		if e.opts.Import != nil {
			if sn, err = e.opts.Import(ctx); err != nil {
				return fmt.Errorf("import the tables: %w", err)
			}
		}
		e.state = machine.Restore(sn)
		if len(sn.Tiers) == 0 {
			e.state = machine.New()
		}
		if err := e.saveSnapshotNow(ctx, 0, e.state.Snapshot()); err != nil {
			return err
		}
		e.log.Info("ledger journal started", zap.Int("accounts", len(sn.Accounts)), zap.Int("keys", len(sn.Keys)))
		return e.catchUp(ctx)
	}
	var sn machine.Snapshot
	if err := json.Unmarshal(body, &sn); err != nil {
		return fmt.Errorf("snapshot at seq %d: %w", seq, err)
	}
	e.state, e.seq, e.snap = machine.Restore(sn), seq, seq
	return e.catchUp(ctx)
}

// catchUp folds every record after e.seq, up to the journal's end as a read found it
// (a read that comes back short). After Acquire that is the journal's end; before, the
// owner may append more, which follow folds: waiting for a read that finds nothing
// would never end under a steady load.
func (e *Engine) catchUp(ctx context.Context) error {
	for {
		n, err := e.fold(ctx)
		if err != nil || n < readChunk {
			return err
		}
	}
}

// fold applies the next records of the journal to the state and returns how many.
func (e *Engine) fold(ctx context.Context) (int, error) {
	recs, err := e.j.Read(ctx, e.seq, readChunk)
	if err != nil {
		return 0, err
	}
	e.heard()
	for _, r := range recs {
		if r.Seq != e.seq+1 {
			return 0, fmt.Errorf("journal gap: seq %d after %d", r.Seq, e.seq)
		}
		ev, err := codec.Decode(r.Body)
		if err != nil {
			return 0, fmt.Errorf("journal seq %d: %w", r.Seq, err)
		}
		e.state.Apply(ev)
		e.seq = r.Seq
	}
	e.durable.Store(e.seq)
	return len(recs), nil
}

// follow is the standby's life: fold the journal as it grows, and take the lease when
// it is free. It returns once this process owns the shard, with every record of the
// previous owners folded.
func (e *Engine) follow(ctx context.Context) error {
	t := time.NewTicker(e.opts.Poll)
	defer t.Stop()
	for {
		n, err := e.fold(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			acquire := e.j.Acquire
			if e.opts.AddrBound {
				acquire = e.j.Claim
			}
			lease, err := acquire(ctx, e.name, e.opts.Addr, e.opts.Lease)
			switch {
			case err == nil:
				e.heard()
				// Acquire waited for the old owner's last append: everything it will
				// ever have written is readable now.
				e.epoch = lease.Epoch
				e.leaseEnd.Store(time.Now().Add(e.opts.Lease / 2).UnixNano())
				addr := lease.Addr
				e.ownerAddr.Store(&addr)
				return e.catchUp(ctx)
			case errors.Is(err, journal.ErrHeld):
				e.heard()
				var held *journal.HeldError
				if errors.As(err, &held) {
					addr := held.Lease.Addr
					e.ownerAddr.Store(&addr)
				}
				e.markKnown() // another process owns the ledger
			default:
				e.log.Warn("ledger standby: acquire failed", zap.Error(err))
			}
		} else if n < readChunk {
			// An owner is appending. Under a steady load no read finds the journal
			// idle, so learn where the owner is without trying to take over.
			e.learnOwner(ctx)
		}
		if n == readChunk {
			continue
		}
		e.refuseQueued()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// learnOwner notes where the shard's current owner is, as its lease says.
func (e *Engine) learnOwner(ctx context.Context) {
	lease, err := e.j.Current(ctx)
	if err != nil {
		e.log.Debug("ledger standby: reading the owner failed", zap.Error(err))
		return
	}
	e.heard()
	if lease.Owner != "" {
		addr := lease.Addr
		e.ownerAddr.Store(&addr)
		e.markKnown()
	}
}

// saveSnapshot makes the snapshot c was captured for and saves it as the state after
// seq; it runs off the decide loop, which takes no other capture until it returns.
func (e *Engine) saveSnapshot(ctx context.Context, seq int64, c *machine.Capture) {
	defer e.saving.Store(false)
	if err := e.saveSnapshotNow(ctx, seq, c.Snapshot()); err != nil && ctx.Err() == nil {
		e.log.Warn("ledger snapshot not saved", zap.Int64("seq", seq), zap.Error(err))
	}
}

func (e *Engine) saveSnapshotNow(ctx context.Context, seq int64, sn machine.Snapshot) error {
	body, err := json.Marshal(sn)
	if err != nil {
		return err
	}
	return e.j.SaveSnapshot(ctx, seq, body)
}
