package materialize_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/engine/materialize"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
)

// both makes the same operations on a store's ledger and on a state machine, the
// machine taking the ids the store made, and collects the machine's events.
type both struct {
	t   *testing.T
	s   *store.Store
	clk *clock
	st  *machine.State
	evs []machine.Event
}

func (b *both) decide(c machine.Command) machine.Answer {
	b.t.Helper()
	ans, evs := b.st.Decide(c)
	if ans.Err != nil {
		b.t.Fatalf("machine: %T: %v", c, ans.Err)
	}
	b.evs = append(b.evs, evs...)
	return ans
}

func (b *both) reserve(req ledger.ReserveRequest) string {
	b.t.Helper()
	r := must(b.s.Reserve(context.Background(), req))(b.t)
	if ans := b.decide(machine.Reserve{ID: r.ID, Request: req, At: b.clk.Now()}); ans.Reservation.ID != r.ID {
		b.t.Fatalf("machine reserved %+v, store %+v", ans.Reservation, r)
	}
	return r.ID
}

func (b *both) commit(c ledger.CommitRequest) {
	b.t.Helper()
	must(b.s.Commit(context.Background(), c))(b.t)
	b.decide(machine.Commit{Request: c, At: b.clk.Now()})
}

func (b *both) release(id, reason string) {
	b.t.Helper()
	must(b.s.Release(context.Background(), id, reason))(b.t)
	b.decide(machine.Release{ReservationID: id, Reason: reason, At: b.clk.Now()})
}

func (b *both) renew(id string, ttl time.Duration) {
	b.t.Helper()
	must(b.s.Renew(context.Background(), id, ttl))(b.t)
	b.decide(machine.Renew{ReservationID: id, TTL: ttl, At: b.clk.Now()})
}

func (b *both) expire() {
	b.t.Helper()
	n := must(b.s.ExpireDue(context.Background(), 100))(b.t)
	if ans := b.decide(machine.ExpireDue{Limit: 100, At: b.clk.Now()}); ans.Expired != n {
		b.t.Fatalf("machine expired %d, store %d", ans.Expired, n)
	}
}

// TestReservationRowsAsTheStoreWrites makes holds, commits (capped and not), releases
// (with a reason and without), renewals and expiries through the store and the machine,
// materializes the machine's events in calls of several sizes, and compares the
// reservations rows with the store's: equal, column for column.
func TestReservationRowsAsTheStoreWrites(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: t2}
	pool := storetest.NewPool(t, storetest.NewDB(t), 4)
	b := &both{t: t, s: store.New(pool, store.Options{Now: clk.Now}), clk: clk, st: machine.New()}

	acct := must(b.s.CreateAccount(ctx, ledger.NewAccount{}))(t).ID
	b.decide(machine.CreateAccount{ID: acct, At: t2})
	must(b.s.TopUp(ctx, acct, 50_000_000, ""))(t)
	b.decide(machine.TopUp{AccountID: acct, Amount: 50_000_000, At: t2})
	nk := ledger.NewKey{AccountID: acct, Hash: hash("k")}
	key := must(b.s.CreateKey(ctx, nk))(t).ID
	b.decide(machine.CreateKey{ID: key, Key: nk, At: t2})

	hold := func(req string, amount ledger.Micros, p ledger.Pool, ttl time.Duration) string {
		return b.reserve(ledger.ReserveRequest{RequestID: req, KeyID: key, Model: "m", Amount: amount, Pool: p, TTL: ttl})
	}
	committed := hold("committed", 2_000_000, ledger.PoolHighCost, 10*time.Minute)
	capped := hold("capped", 1_000_000, ledger.PoolGeneral, 10*time.Minute)
	released := hold("released", 1_500_000, ledger.PoolGeneral, 10*time.Minute)
	free := hold("free", 0, ledger.PoolGeneral, 10*time.Minute)
	hold("expiring", 500_000, ledger.PoolGeneral, time.Minute)
	renewedThenExpired := hold("renewed-expired", 700_000, ledger.PoolGeneral, time.Minute)
	renewedThenCommitted := hold("renewed-committed", 300_000, ledger.PoolHighCost, 5*time.Minute)
	renewedHeld := hold("renewed-held", 1_000_000, ledger.PoolGeneral, 5*time.Minute)
	hold("held", 400_000, ledger.PoolGeneral, time.Hour)

	clk.Set(t2.Add(30 * time.Second))
	b.renew(renewedThenExpired, 2*time.Minute)
	b.renew(renewedThenCommitted, 10*time.Minute)
	b.renew(renewedHeld, 20*time.Minute)
	b.renew(renewedHeld, 30*time.Minute)
	clk.Set(t2.Add(time.Minute))
	b.commit(ledger.CommitRequest{ReservationID: committed, Actual: 1_200_000, Channel: "ch", Usage: ledger.Usage{InputTokens: 3}})
	b.commit(ledger.CommitRequest{ReservationID: capped, Actual: 3_000_000})
	b.release(released, "client gone")
	b.release(free, "")
	b.commit(ledger.CommitRequest{ReservationID: renewedThenCommitted, Actual: 0})
	clk.Set(t2.Add(90 * time.Second))
	b.expire() // expiring only
	clk.Set(t2.Add(3 * time.Minute))
	b.expire() // renewedThenExpired
	quick := hold("quick", 100_000, ledger.PoolGeneral, time.Minute)
	b.release(quick, "cancelled")

	want := reservationRows(t, pool)
	if n := strings.Count(want, "\n"); n != 9 {
		t.Fatalf("the store wrote %d reservations rows, want 10:\n%s", n+1, want)
	}
	for _, sizes := range [][]int{{len(b.evs)}, {1}, {4, 9}, {10}} {
		mat := storetest.NewPool(t, storetest.NewDB(t), 4)
		applyIn(t, materialize.New(mat, 0, machine.Snapshot{}, 0), b.evs, sizes...)
		if got := reservationRows(t, mat); got != want {
			t.Errorf("materialized in calls of %v:\n%s\nthe store's:\n%s", sizes, got, want)
		}
		if err := storetest.CheckInvariants(ctx, mat); err != nil {
			t.Errorf("materialized in calls of %v: %v", sizes, err)
		}
	}
}

// reservationRows is the reservations table as text, every column, by id.
func reservationRows(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var rows string
	err := pool.QueryRow(context.Background(),
		`SELECT coalesce(string_agg(r::text, E'\n' ORDER BY r.id), '') FROM reservations r`).Scan(&rows)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestReusedRequestIDArchivesTheOldRow reserves a request id again after the machine
// forgot its settled reservation: the old row moves to the archive and the new one is
// inserted, in one call or across calls.
func TestReusedRequestIDArchivesTheOldRow(t *testing.T) {
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
		pool := storetest.NewPool(t, storetest.NewDB(t), 4)
		applyIn(t, materialize.New(pool, 0, machine.Snapshot{}, 0), evs, sizes...)
		var hot, archived string
		err := pool.QueryRow(ctx, `SELECT (SELECT string_agg(id::text || ' ' || state, ',') FROM reservations),
			(SELECT string_agg(id::text || ' ' || state, ',') FROM reservations_archive)`).Scan(&hot, &archived)
		if err != nil {
			t.Fatal(err)
		}
		if hot != res2+" held" || archived != res1+" committed" {
			t.Errorf("in calls of %v: reservations %q, archive %q", sizes, hot, archived)
		}
		if err := storetest.CheckInvariants(ctx, pool); err != nil {
			t.Errorf("in calls of %v: %v", sizes, err)
		}
	}
}
