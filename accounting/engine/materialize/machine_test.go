package materialize_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/engine/materialize"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// TestTablesAnswerAsTheMachine decides random commands with the state machine,
// materializes its events in calls of random sizes, and reads every account and key
// through the tables' reports: each answers as the machine does. The tables keep the store's
// invariants, and load back into the machine's state (as far as Load reads it).
func TestTablesAnswerAsTheMachine(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(42, 7))
	st := machine.New()
	ref := machine.New() // st's events but Forgotten: what the tables keep
	now := t2
	var evs []machine.Event
	decide := func(c machine.Command) machine.Answer {
		ans, e := st.Decide(c)
		evs = append(evs, e...)
		for _, ev := range e {
			if _, forgot := ev.(machine.Forgotten); !forgot {
				ref.Apply(ev)
			}
		}
		return ans
	}
	var accounts, keys, held []string
	for i := range 6 {
		id := fmt.Sprintf("0a000000-0000-4000-8000-%012d", i)
		decide(machine.CreateAccount{ID: id, At: now})
		decide(machine.TopUp{AccountID: id, Amount: 20_000_000, IdempotencyKey: "first", At: now})
		decide(machine.TopUp{AccountID: id, Amount: 20_000_000, IdempotencyKey: "first", At: now}) // replayed
		accounts = append(accounts, id)
		for j := range 2 {
			kid := fmt.Sprintf("0b000000-0000-4000-8000-%06d%06d", i, j)
			decide(machine.CreateKey{ID: kid, Key: ledger.NewKey{AccountID: id, Hash: hash(kid), DailyLimit: ptr[ledger.Micros](15_000_000)}, At: now})
			keys = append(keys, kid)
		}
	}
	for i := range 400 {
		now = now.Add(time.Duration(rng.IntN(20)) * time.Second)
		switch op := rng.IntN(12); {
		case op < 5:
			id := fmt.Sprintf("0c000000-0000-7000-8000-%012d", i)
			ans := decide(machine.Reserve{ID: id, At: now, Request: ledger.ReserveRequest{RequestID: id, KeyID: keys[rng.IntN(len(keys))],
				Model: "m", Amount: ledger.Micros(rng.IntN(3)) * 500_000, Pool: ledger.Pool(1 + rng.IntN(2)), TTL: 10 * time.Minute}})
			if ans.Err == nil {
				held = append(held, id)
			}
		case op < 8 && len(held) > 0:
			r := take(&held, rng)
			decide(machine.Commit{At: now, Request: ledger.CommitRequest{ReservationID: r, Actual: ledger.Micros(rng.IntN(2_000_000)),
				Usage: ledger.Usage{InputTokens: 10, OutputTokens: 5}, Channel: "ch"}})
		case op < 9 && len(held) > 0:
			decide(machine.Release{ReservationID: take(&held, rng), Reason: "r", At: now})
		case op < 10 && len(held) > 0:
			decide(machine.Renew{ReservationID: held[rng.IntN(len(held))], TTL: time.Duration(5+rng.IntN(20)) * time.Minute, At: now})
		case op < 11:
			decide(machine.Forget{Before: now.Add(-15 * time.Minute), At: now})
		default:
			decide(machine.ExpireDue{Limit: 10, At: now})
		}
	}

	var commits, releases, renewals, forgets int
	for _, e := range evs {
		switch e.(type) {
		case machine.Committed:
			commits++
		case machine.Released:
			releases++
		case machine.Renewed:
			renewals++
		case machine.Forgotten:
			forgets++
		}
	}
	if commits < 50 || releases < 20 || renewals < 10 || forgets < 5 {
		t.Fatalf("only %d commits, %d releases, %d renewals and %d forgets decided", commits, releases, renewals, forgets)
	}

	pool := tablestest.NewPool(t, tablestest.NewDB(t), 4)
	s := tables.New(pool, tables.Options{Now: func() time.Time { return now }})
	m := materialize.New(pool, 0, machine.Snapshot{}, 0)
	for i := 0; i < len(evs); {
		n := min(1+rng.IntN(40), len(evs)-i)
		if err := m.Apply(ctx, seqsFrom(int64(i+1), n), evs[i:i+n]); err != nil {
			t.Fatal(err)
		}
		i += n
	}
	for _, id := range accounts {
		ans, _ := st.Decide(machine.GetAccount{AccountID: id})
		if got := account(t, s, id); !reflect.DeepEqual(got, ans.Account) {
			t.Errorf("account in the tables %+v, machine's %+v", got, ans.Account)
		}
	}
	for _, id := range keys {
		ans, _ := st.Decide(machine.GetKey{KeyID: id, At: now})
		got := key(t, pool, s, id)
		if !reflect.DeepEqual(got, ans.Key) {
			t.Errorf("key in the tables %+v, machine's %+v", got, ans.Key)
		}
	}
	if err := tablestest.CheckInvariantsOf(ctx, pool, evs); err != nil {
		t.Error(err)
	}
	checkLoadsBack(t, pool, ref, now)
}

// checkLoadsBack loads the tables at now into a state machine and compares its snapshot
// with ref's, less what Load leaves out: the requests-per-minute window (not
// materialized), every reservation (the materializer writes none since migration 0023:
// Load reads those of a ledger the store engine kept), and spend windows of earlier
// months that hold nothing.
func checkLoadsBack(t *testing.T, pool *pgxpool.Pool, ref *machine.State, now time.Time) {
	t.Helper()
	loaded := must(materialize.LoadAt(context.Background(), pool, now))(t)
	back := machine.Restore(loaded)
	got, want := back.Snapshot(), ref.Snapshot()
	for i := range want.Accounts {
		want.Accounts[i].RPMMinute, want.Accounts[i].RPMCount = time.Time{}, 0
	}
	if len(got.Reservations) != 0 {
		t.Errorf("%d reservations loaded from tables that hold none", len(got.Reservations))
	}
	want.Reservations = nil
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	want.Windows = slices.DeleteFunc(want.Windows, func(w machine.SpendWindow) bool {
		return w.Start.Before(month) && w.Held == 0
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded back:\n%+v\nthe machine's:\n%+v", got, want)
	}
}

// take removes a random element of s and returns it.
func take(s *[]string, rng *rand.Rand) string {
	i := rng.IntN(len(*s))
	v := (*s)[i]
	*s = append((*s)[:i], (*s)[i+1:]...)
	return v
}
