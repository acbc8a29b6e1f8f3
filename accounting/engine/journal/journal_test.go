package journal_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/gateway/accounting/engine/journal"
)

// Appended batches read back in order, across partitions, and Last follows them; the
// shards of one database are separate journals.
func TestAppendReadLast(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, 4)
	opts := journal.Options{PartitionSize: 8}
	j, epoch := owned(t, pool, 1, opts, "a")
	other, otherEpoch := owned(t, pool, 2, opts, "a")

	if last := lastOf(t, j); last != 0 {
		t.Fatalf("empty journal: Last = %d", last)
	}
	var want []journal.Record
	for _, n := range []int{1, 3, 10, 1, 20} { // crossing partitions of 8, and batches larger than one
		recs := batch(int64(len(want))+1, n)
		if err := j.Append(ctx, epoch, recs); err != nil {
			t.Fatalf("append %d records after %d: %v", n, len(want), err)
		}
		want = append(want, recs...)
		if last := lastOf(t, j); last != int64(len(want)) {
			t.Fatalf("Last = %d, want %d", last, len(want))
		}
	}
	if err := other.Append(ctx, otherEpoch, batch(1, 2)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, readAll(t, j)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	got, err := j.Read(ctx, 30, 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[30:33], got); diff != "" {
		t.Errorf("Read(30, 3) (-want +got):\n%s", diff)
	}
	if got, err := j.Read(ctx, 35, 10); err != nil || len(got) != 0 {
		t.Errorf("Read after the last: %v, %v; want none", got, err)
	}
	if last := lastOf(t, other); last != 2 {
		t.Errorf("the other shard's Last = %d, want 2", last)
	}
	// An empty body is stored as one (not NULL).
	if err := j.Append(ctx, epoch, []journal.Record{{Seq: 36}}); err != nil {
		t.Fatal(err)
	}
	if got, err := j.Read(ctx, 35, 1); err != nil || len(got) != 1 || got[0].Body == nil || len(got[0].Body) != 0 {
		t.Errorf("the empty body read back as %#v, %v", got, err)
	}
}

// Records must be numbered consecutively, the first after the journal's last one; a
// refused batch writes nothing.
func TestAppendRefusesGapsAndDuplicates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j, epoch := owned(t, newPool(t, 2), 1, journal.Options{PartitionSize: 16}, "a")
	if err := j.Append(ctx, epoch, batch(1, 5)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		recs []journal.Record
	}{
		{"gap before the batch", batch(7, 2)},
		{"first record again", batch(1, 1)},
		{"overlapping the last", batch(5, 3)},
		{"a whole batch again", batch(1, 5)},
		{"gap inside the batch", []journal.Record{{Seq: 6}, {Seq: 8}}},
		{"duplicate inside the batch", []journal.Record{{Seq: 6}, {Seq: 6}}},
		{"backwards", []journal.Record{{Seq: 7}, {Seq: 6}}},
		{"seq 0", []journal.Record{{Seq: 0}}},
	} {
		if err := j.Append(ctx, epoch, tt.recs); !errors.Is(err, journal.ErrSeq) {
			t.Errorf("%s: %v, want ErrSeq", tt.name, err)
		}
	}
	if diff := cmp.Diff(batch(1, 5), readAll(t, j)); diff != "" {
		t.Errorf("records after the refusals (-want +got):\n%s", diff)
	}
	if err := j.Append(ctx, epoch, batch(6, 2)); err != nil {
		t.Errorf("the next batch after the refusals: %v", err)
	}
}

// A journal that starts empty needs its first record to be 1.
func TestFirstRecordIsOne(t *testing.T) {
	t.Parallel()
	j, epoch := owned(t, newPool(t, 2), 1, journal.Options{}, "a")
	if err := j.Append(context.Background(), epoch, batch(2, 1)); !errors.Is(err, journal.ErrSeq) {
		t.Errorf("first record 2: %v, want ErrSeq", err)
	}
}
