package opqueue_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/llmgw/gateway/internal/opqueue"
)

type op struct {
	id int
	t  opqueue.Ticket
}

func ticket(o *op) *opqueue.Ticket { return &o.t }

func ids(ops []*op) string {
	var s []int
	for _, o := range ops {
		s = append(s, o.id)
	}
	return fmt.Sprint(s)
}

func TestTakeSkipsAbandonedAndKeepsTheRest(t *testing.T) {
	q := []*op{{id: 1}, {id: 2}, {id: 3}, {id: 4}, {id: 5}}
	if !q[1].t.Abandon() {
		t.Fatal("a queued operation could not be abandoned")
	}
	batch, rest := opqueue.Take(q, 3, ticket)
	if ids(batch) != "[1 3]" || ids(rest) != "[4 5]" {
		t.Fatalf("batch %s rest %s, want [1 3] and [4 5]", ids(batch), ids(rest))
	}
	if q[0] != nil || q[2] != nil {
		t.Error("the queue still points at taken operations")
	}
	if batch[0].t.Abandon() {
		t.Error("a taken operation was abandoned")
	}
	batch, rest = opqueue.Take(rest, 10, ticket)
	if ids(batch) != "[4 5]" || len(rest) != 0 {
		t.Fatalf("batch %s rest %s", ids(batch), ids(rest))
	}
	batch, rest = opqueue.Take(rest, 10, ticket)
	if len(batch) != 0 || len(rest) != 0 {
		t.Fatalf("an empty queue gave %s, %s", ids(batch), ids(rest))
	}
}

// Each operation is either taken or abandoned, never both, however the two race.
func TestTakeAndAbandonRace(t *testing.T) {
	for range 200 {
		q := make([]*op, 64)
		for i := range q {
			q[i] = &op{id: i}
		}
		gaveUp := make([]bool, len(q))
		var wg sync.WaitGroup
		for i, o := range q {
			wg.Go(func() { gaveUp[i] = o.t.Abandon() })
		}
		batch, _ := opqueue.Take(append([]*op(nil), q...), len(q), ticket)
		wg.Wait()
		inBatch := map[int]bool{}
		for _, o := range batch {
			inBatch[o.id] = true
		}
		for i := range q {
			if inBatch[i] == gaveUp[i] {
				t.Fatalf("operation %d: taken %v, abandoned %v", i, inBatch[i], gaveUp[i])
			}
		}
	}
}
