package materialize_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/engine/materialize"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
)

// TestHandOverFromTheStore settles, through the Materializer, holds the store made: a
// Materializer started from Load's snapshot knows them, and the store's tables end as
// the store would have left them.
func TestHandOverFromTheStore(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: t2}
	pool := storetest.NewPool(t, storetest.NewDB(t), 4)
	s := store.New(pool, store.Options{Now: clk.Now})
	a := must(s.CreateAccount(ctx, ledger.NewAccount{}))(t).ID
	must(s.TopUp(ctx, a, 10_000_000, ""))(t)
	k := must(s.CreateKey(ctx, ledger.NewKey{AccountID: a, Hash: hash("h"), MonthlyLimit: ptr[ledger.Micros](8_000_000)}))(t).ID
	r1 := must(s.Reserve(ctx, ledger.ReserveRequest{RequestID: "1", KeyID: k, Model: "m", Amount: 3_000_000, Pool: ledger.PoolHighCost}))(t)
	r2 := must(s.Reserve(ctx, ledger.ReserveRequest{RequestID: "2", KeyID: k, Model: "m", Amount: 2_000_000, Pool: ledger.PoolGeneral}))(t)

	sn := must(materialize.LoadAt(ctx, pool, t2))(t)
	m := materialize.New(pool, 0, sn, 0)
	at := t2.Add(time.Minute)
	err := m.Apply(ctx, []int64{1, 2}, []machine.Event{
		machine.Committed{ReservationID: r1.ID, Actual: 1_200_000, Charged: 1_200_000, At: at},
		machine.Released{ReservationID: r2.ID, State: ledger.StateReleased, At: at},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := must(s.GetAccount(ctx, a))(t)
	if got.Balance != 8_800_000 || got.Reserved != 0 || got.InFlight != 0 || got.InFlightHighCost != 0 {
		t.Errorf("account after the handover %+v", got)
	}
	key := must(s.GetKey(ctx, k))(t)
	if key.SpentMonth != 1_200_000 || key.HeldMonth != 0 || key.SpentToday != 1_200_000 || key.HeldToday != 0 {
		t.Errorf("key after the handover %+v", key)
	}
	entries := must(s.LedgerEntries(ctx, a, 0, 10))(t)
	if len(entries) != 2 || entries[0].ReservationID != r1.ID || entries[0].Amount != -1_200_000 || entries[0].Model != "m" {
		t.Errorf("entries after the handover %+v", entries)
	}
	// The store's rows of the holds are settled as the store would have settled them.
	if c := must(s.Commit(ctx, ledger.CommitRequest{ReservationID: r1.ID, Actual: 1_200_000}))(t); !c.Replayed || c.Charged != 1_200_000 {
		t.Errorf("the store answers a replayed commit with %+v", c)
	}
	if r := must(s.Release(ctx, r2.ID, ""))(t); r.State != ledger.StateReleased {
		t.Errorf("the store answers a replayed release with %+v", r)
	}
	if err := storetest.CheckInvariants(ctx, pool); err != nil {
		t.Error(err)
	}
}
