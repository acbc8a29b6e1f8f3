package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
)

// The group-commit decision (Go, group_decide.go) and the lone one (the PL/pgSQL
// functions) are two implementations of one rule. TestGroupCommitDecidesAsAlone drives
// both with the same random operations — admissions that hit every limit, replays,
// request ids reused across keys, commits over and under the hold, retried and unknown
// settlements — the group store in batches, the lone store one at a time in the same
// order, and demands the same answer to every operation and the same ledger after.

// tightTier makes the rpm and in-flight limits bite within a few operations.
var tightTier = ledger.Tier{Name: "tight", RPMBeforeTopUp: 3, RPMAfterTopUp: 5,
	InFlightGeneral: 12, InFlightHighCost: 2}

// twin is one of the two stores, with the ids of its accounts, keys and reservations
// in creation order (the two twins' ids differ; their positions match).
type twin struct {
	f        *fixture
	accounts []string
	keys     []string
	res      []string
}

func newTwin(t *testing.T, opts store.Options) *twin {
	clk := &clock{t: t0}
	opts.Now = clk.Now
	s, pool := storetest.NewStore(t, 8, opts)
	w := &twin{f: &fixture{s: s, pool: pool, clk: clk}}
	w.f.tier(t, tightTier)
	for i, balance := range []ledger.Micros{500_000, 9_000, 0} {
		a := w.f.account(t, tightTier.Name, balance)
		w.accounts = append(w.accounts, a.ID)
		for j := range 2 {
			k, _ := w.f.key(t, a.ID, func(nk *ledger.NewKey) {
				switch (2*i + j) % 3 { // account 0's first key has no limit
				case 2:
					nk.DailyLimit = ptr[ledger.Micros](12_000)
				case 1:
					nk.MonthlyLimit = ptr[ledger.Micros](20_000)
				}
				if i == 1 && j == 1 {
					expired := t0.Add(30 * time.Minute)
					nk.ExpiresAt = &expired
				}
			})
			w.keys = append(w.keys, k.ID)
		}
	}
	return w
}

// op is one operation in terms of positions.
type op struct {
	kind     int // 0 reserve, 1 commit, 2 release
	key      int
	request  string
	amount   ledger.Micros
	pool     ledger.Pool
	res      int // position in twin.res; -1: an id no reservation has
	actual   ledger.Micros
	released string
}

// outcome is what an operation answered, without ids.
type outcome string

// result is an operation's raw answer.
type result struct {
	res ledger.Reservation
	com ledger.CommitResult
	rel ledger.ReleaseResult
	err error
}

// exec runs o (safe to call concurrently: it only reads w.res, which record changes
// between batches).
func (w *twin) exec(ctx context.Context, o op) (r result) {
	switch o.kind {
	case 0:
		r.res, r.err = w.f.s.Reserve(ctx, ledger.ReserveRequest{RequestID: o.request, KeyID: w.keys[o.key],
			Model: "demo-chat", Amount: o.amount, Pool: o.pool})
	case 1:
		r.com, r.err = w.f.s.Commit(ctx, ledger.CommitRequest{ReservationID: w.resID(o.res), Actual: o.actual,
			Usage: ledger.Usage{InputTokens: 3, OutputTokens: 4}})
	default:
		r.rel, r.err = w.f.s.Release(ctx, w.resID(o.res), o.released)
	}
	return r
}

// record describes r, numbering a new reservation by its first appearance.
func (w *twin) record(o op, r result) outcome {
	if r.err != nil {
		return describe(r.err)
	}
	switch o.kind {
	case 0:
		pos := len(w.res)
		for i, id := range w.res {
			if id == r.res.ID {
				pos = i
			}
		}
		if pos == len(w.res) {
			w.res = append(w.res, r.res.ID)
		}
		return outcome(fmt.Sprintf("reservation #%d amount %d pool %d state %v charged %d account %d expires %s",
			pos, r.res.Amount, r.res.Pool, r.res.State, r.res.Charged, w.accountPos(r.res.AccountID), r.res.ExpiresAt.Sub(r.res.CreatedAt)))
	case 1:
		return outcome(fmt.Sprintf("commit %+v", r.com))
	}
	return outcome(fmt.Sprintf("release %+v", r.rel))
}

func (w *twin) resID(pos int) string {
	if pos < 0 || pos >= len(w.res) {
		return "00000000-0000-4000-8000-000000000000"
	}
	return w.res[pos]
}

func (w *twin) accountPos(id string) int {
	for i, a := range w.accounts {
		if a == id {
			return i
		}
	}
	return -1
}

func describe(err error) outcome {
	var r *ledger.Refusal
	if errors.As(err, &r) {
		return outcome(fmt.Sprintf("refused %v limit %q retry after %d", r.Reason, r.Limit, r.RetryAfter))
	}
	if errors.Is(err, ledger.ErrNotFound) {
		return "not found"
	}
	return outcome("error " + err.Error())
}

func TestGroupCommitDecidesAsAlone(t *testing.T) {
	t.Parallel()
	forEachBatchPath(t, testDecidesAsAlone)
}

func testDecidesAsAlone(t *testing.T, opts store.Options) {
	ctx := context.Background()
	group, alone := newTwin(t, opts), newTwin(t, store.Options{NoGroupCommit: true})
	rng := rand.New(rand.NewPCG(14, 3))
	requests := 0
	// settled picks a reservation of an earlier round (its id is known before the
	// round's operations run), or -1 for an id no reservation has.
	settled := func() int { return rng.IntN(len(group.res)+1) - 1 }
	nextOp := func() op {
		switch n := rng.IntN(10); {
		case n < 5:
			o := op{kind: 0, key: rng.IntN(len(group.keys)), amount: ledger.Micros(rng.IntN(6) * 1_000), pool: ledger.PoolGeneral}
			if rng.IntN(5) == 0 {
				o.pool = ledger.PoolHighCost
			}
			if requests > 0 && rng.IntN(6) == 0 {
				o.request = fmt.Sprintf("r%d", rng.IntN(requests)) // a replay, maybe from another key
			} else {
				requests++
				o.request = fmt.Sprintf("r%d", requests-1)
			}
			return o
		case n < 8:
			return op{kind: 1, res: settled(), actual: ledger.Micros(rng.IntN(7) * 700)}
		default:
			return op{kind: 2, res: settled(), released: "client gone"}
		}
	}
	seen := map[string]int{}
	for round := range 120 {
		// A round's operations happen at one instant; every third round the clock moves
		// on, over minute, hour and day boundaries (and past the expired key's expiry).
		now := t0.Add(time.Duration(round/3) * 17 * time.Minute)
		group.f.clk.Set(now)
		alone.f.clk.Set(now)
		ops := make([]op, 1+rng.IntN(12))
		for i := range ops {
			ops[i] = nextOp()
		}
		raw := make([]result, len(ops))
		calls := make([]func(), len(ops))
		for i, o := range ops {
			calls[i] = func() { raw[i] = group.exec(ctx, o) }
		}
		batchOf(t, group.f.s, calls...)
		for i, o := range ops {
			got := group.record(o, raw[i])
			seen[kindOf(got)]++
			if want := alone.record(o, alone.exec(ctx, o)); got != want {
				t.Fatalf("round %d op %d %+v:\n group: %s\n alone: %s", round, i, o, got, want)
			}
		}
	}
	t.Logf("outcomes: %v", seen)
	// The generator must keep reaching every rule, or this test proves less than it says.
	for _, k := range []string{"reservation state 1", "already_exists", "insufficient_credits", "invalid_api_key",
		"key_limit_reached", "concurrency_limit_exceeded", "rate_limit_exceeded", "reservation_settled", "not",
		"commit", "release"} {
		if seen[k] == 0 {
			t.Errorf("no operation had outcome %q", k)
		}
	}
	for i := range group.accounts {
		g, a := group.f.getAccount(t, group.accounts[i]), alone.f.getAccount(t, alone.accounts[i])
		g.ID, a.ID, g.CreatedAt, a.CreatedAt = "", "", time.Time{}, time.Time{}
		if fmt.Sprintf("%+v", g) != fmt.Sprintf("%+v", a) {
			t.Errorf("account %d:\n group: %+v\n alone: %+v", i, g, a)
		}
	}
	group.f.checkInvariants(t)
	alone.f.checkInvariants(t)
}

// kindOf is an outcome's kind, for the coverage count: its first word, the reason of a
// refusal, the state of a reservation.
func kindOf(o outcome) string {
	f := strings.Fields(string(o))
	switch f[0] {
	case "refused":
		return f[1]
	case "reservation":
		return "reservation state " + f[7]
	}
	return f[0]
}
