package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/engine/codec"
	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// TestSnapshotsTakenWhileDeciding: under concurrent reserves and commits the owner
// takes snapshots (captured on the decide loop, made and saved off it); each saved
// one, with the records after it folded in, is the owner's state; and snapshots are
// spaced by at least as many events as the state held reservations.
func TestSnapshotsTakenWhileDeciding(t *testing.T) {
	j := newMemJournal()
	const every = 40
	r := start(t, j, Options{SnapshotEvery: every, SettleDelay: -1})
	waitOwning(t, r, 5*time.Second)
	_, k := fund(t, r, "k", 1<<40)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				res, err := r.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprint(g, "-", i), KeyID: k.ID,
					Amount: 100, Pool: ledger.PoolGeneral})
				if err == nil && i%5 != 0 { // every fifth stays held
					_, err = r.Commit(ctx, ledger.CommitRequest{ReservationID: res.ID, Actual: 60})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A read once everything is durable; the last saves may still be running.
	if _, err := r.GetAccount(ctx, k.AccountID); err != nil {
		t.Fatal(err)
	}
	want := r.state.Snapshot()
	for t0 := time.Now(); r.saving.Load(); time.Sleep(time.Millisecond) {
		if time.Since(t0) > 5*time.Second {
			t.Fatal("a snapshot is still being saved after 5 s")
		}
	}

	j.mu.Lock()
	var seqs []int64
	for seq := range j.snaps {
		seqs = append(seqs, seq)
	}
	j.mu.Unlock()
	slices.Sort(seqs)
	if len(seqs) < 4 {
		t.Fatalf("snapshots at seqs %v: want several over 1,600 events", seqs)
	}
	t.Logf("snapshots at seqs %v", seqs)
	for i, seq := range seqs[1:] {
		j.mu.Lock()
		body := j.snaps[seq]
		j.mu.Unlock()
		var sn machine.Snapshot
		if err := json.Unmarshal(body, &sn); err != nil {
			t.Fatal(err)
		}
		if gap := seq - seqs[i]; gap < every || gap < int64(len(sn.Reservations)) {
			t.Errorf("snapshot at %d only %d events after the one before; it holds %d reservations",
				seq, gap, len(sn.Reservations))
		}
		st := machine.Restore(sn)
		recs, _ := j.Read(ctx, seq, 1<<30)
		for _, rec := range recs {
			ev, err := codec.Decode(rec.Body)
			if err != nil {
				t.Fatalf("seq %d: %v", rec.Seq, err)
			}
			st.Apply(ev)
		}
		if err := st.Check(); err != nil {
			t.Fatalf("snapshot at %d and what follows: %v", seq, err)
		}
		if got := st.Snapshot(); !reflect.DeepEqual(got, want) {
			t.Errorf("snapshot at %d with the %d records after it differs from the owner's state", seq, len(recs))
		}
	}
}
