package materialize_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/engine/materialize"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// TestReusedRequestID reserves a request id again after the machine forgot its settled
// reservation, in one call or across calls: both holds count, neither is a row
// (migration 0023), and the tables agree with the events.
func TestReusedRequestID(t *testing.T) {
	ctx := context.Background()
	st := machine.New()
	var evs []machine.Event
	decide := func(c machine.Command) machine.Answer {
		ans, e := st.Decide(c)
		if ans.Err != nil {
			t.Fatalf("%T: %v", c, ans.Err)
		}
		evs = append(evs, e...)
		return ans
	}
	decide(machine.CreateAccount{ID: accA, At: t2})
	decide(machine.TopUp{AccountID: accA, Amount: 10_000_000, At: t2})
	decide(machine.CreateKey{ID: keyA, Key: ledger.NewKey{AccountID: accA, Hash: hash("a")}, At: t2})
	req := ledger.ReserveRequest{RequestID: "again", KeyID: keyA, Model: "m", Amount: 1_000_000, Pool: ledger.PoolGeneral, TTL: time.Minute}
	decide(machine.Reserve{ID: res1, Request: req, At: t2})
	decide(machine.Commit{Request: ledger.CommitRequest{ReservationID: res1, Actual: 400_000}, At: t2.Add(time.Second)})
	decide(machine.Forget{Before: t2.Add(time.Minute), At: t2.Add(time.Minute)})
	if ans := decide(machine.Reserve{ID: res2, Request: req, At: t2.Add(2 * time.Minute)}); ans.Reservation.ID != res2 {
		t.Fatalf("the forgotten request id was answered with %+v", ans.Reservation)
	}

	for _, sizes := range [][]int{{len(evs)}, {5, 2}, {1}} {
		pool := tablestest.NewPool(t, tablestest.NewDB(t), 4)
		applyIn(t, materialize.New(pool, 0, machine.Snapshot{}, 0), evs, sizes...)
		checkNoReservationRows(t, pool)
		var reserved, inFlight int64
		if err := pool.QueryRow(ctx, `SELECT reserved, in_flight FROM accounts WHERE id = $1`, accA).
			Scan(&reserved, &inFlight); err != nil {
			t.Fatal(err)
		}
		if reserved != 1_000_000 || inFlight != 1 {
			t.Errorf("in calls of %v: reserved %d in %d holds, want the second hold alone", sizes, reserved, inFlight)
		}
		if err := tablestest.CheckInvariantsOf(ctx, pool, evs); err != nil {
			t.Errorf("in calls of %v: %v", sizes, err)
		}
	}
}
