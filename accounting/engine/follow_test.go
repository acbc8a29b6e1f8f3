package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/ledger"
)

// busyReads is a journal the owner appends to before every read, as under a steady
// load: no read finds the journal idle.
type busyReads struct {
	*memJournal
	write func()
}

func (b busyReads) Read(ctx context.Context, after int64, limit int) ([]journal.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.write()
	return b.memJournal.Read(ctx, after, limit)
}

// A standby that finds new records at every read must still learn where the owner
// is, to be ready and to forward its calls, and must still not take over.
func TestStandbyUnderLoadLearnsTheOwner(t *testing.T) {
	j := newMemJournal()
	opts := Options{Lease: time.Second, Poll: 5 * time.Millisecond}
	ownerOpts, standbyOpts := opts, opts
	ownerOpts.Addr, standbyOpts.Addr = "owner:1", "standby:1"
	a := start(t, j, ownerOpts)
	waitOwning(t, a, 5*time.Second)
	_, k := fund(t, a, "k", 1<<40)
	var n atomic.Int64
	write := func() {
		// Fails once the owner stopped, as the test ends; the standby reads on.
		_, _ = a.Reserve(context.Background(), ledger.ReserveRequest{RequestID: fmt.Sprint(n.Add(1)), KeyID: k.ID,
			Amount: 1, Pool: ledger.PoolGeneral})
	}

	b := start(t, busyReads{j, write}, standbyOpts)
	deadline := time.Now().Add(2 * time.Second)
	for b.OwnerAddr() != ownerOpts.Addr {
		if time.Now().After(deadline) {
			t.Fatalf("the standby knows the owner at %q after 2 s of load, want %q (folded %d of %d records)",
				b.OwnerAddr(), ownerOpts.Addr, b.Durable(), a.Durable())
		}
		time.Sleep(time.Millisecond)
	}
	if b.Owning() {
		t.Fatal("the standby owns the ledger while the owner's lease is live")
	}
	// Still following: it folds what the owner appends.
	want := a.Durable()
	if !waitUntil(2*time.Second, func() bool { return b.Durable() >= want }) {
		t.Fatalf("the standby folded %d records, the owner has %d", b.Durable(), want)
	}
}

func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
