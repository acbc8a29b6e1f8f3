package machine

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// t0 is a Saturday noon and a half minute: the minute ends at 12:01, the day at the
// 15th, the month at April.
var t0 = time.Date(2026, 3, 14, 12, 0, 30, 0, time.UTC)

func uuidOf(kind, n int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", kind, n) }

func hashOf(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func ptr[T any](v T) *T { return &v }

// harness decides commands on a state, checks its invariants after each, and folds the
// events into a replica whose snapshot must equal the state's at the end.
type harness struct {
	t       *testing.T
	s       *State
	replica *State
	now     time.Time
	n       int
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, s: New(), replica: New(), now: t0}
	t.Cleanup(func() {
		if !reflect.DeepEqual(h.s.Snapshot(), h.replica.Snapshot()) {
			t.Errorf("the replica of the events differs:\n%+v\n%+v", h.s.Snapshot(), h.replica.Snapshot())
		}
	})
	return h
}

func (h *harness) id(kind int) string {
	h.n++
	return uuidOf(kind, h.n)
}

// do decides c and returns its answer and events.
func (h *harness) do(c Command) (Answer, []Event) {
	h.t.Helper()
	a, evs := h.s.Decide(c)
	if err := h.s.Check(); err != nil {
		h.t.Fatalf("after %#v: %v", c, err)
	}
	if a.Err != nil && len(evs) > 0 {
		h.t.Fatalf("%#v refused (%v) with events %v", c, a.Err, evs)
	}
	for _, e := range evs {
		h.replica.Apply(e)
	}
	return a, evs
}

func (h *harness) must(c Command) Answer {
	h.t.Helper()
	a, _ := h.do(c)
	if a.Err != nil {
		h.t.Fatalf("%#v: %v", c, a.Err)
	}
	return a
}

func (h *harness) account(tier string, balance ledger.Micros) string {
	h.t.Helper()
	id := h.id(1)
	h.must(CreateAccount{ID: id, Tier: tier, At: h.now})
	if balance > 0 {
		h.must(TopUp{AccountID: id, Amount: balance, At: h.now})
	}
	return id
}

func (h *harness) key(acct string, edit func(*ledger.NewKey)) (string, []byte) {
	h.t.Helper()
	id := h.id(2)
	nk := ledger.NewKey{AccountID: acct, Hash: hashOf(id), Prefix: "sk-" + id[:4]}
	if edit != nil {
		edit(&nk)
	}
	h.must(CreateKey{ID: id, Key: nk, At: h.now})
	return id, nk.Hash
}

func (h *harness) reserve(keyID string, amount ledger.Micros, pool ledger.Pool) (ledger.Reservation, error) {
	h.t.Helper()
	id := h.id(3)
	a, _ := h.do(Reserve{ID: id, Request: ledger.ReserveRequest{RequestID: "req-" + id, KeyID: keyID,
		Model: "m", Amount: amount, Pool: pool}, At: h.now})
	return a.Reservation, a.Err
}

func (h *harness) mustReserve(keyID string, amount ledger.Micros, pool ledger.Pool) ledger.Reservation {
	h.t.Helper()
	r, err := h.reserve(keyID, amount, pool)
	if err != nil {
		h.t.Fatalf("reserve %d: %v", amount, err)
	}
	return r
}

func (h *harness) getKey(id string) ledger.Key {
	h.t.Helper()
	return h.must(GetKey{KeyID: id, At: h.now}).Key
}

func (h *harness) getAccount(id string) ledger.Account {
	h.t.Helper()
	return h.must(GetAccount{AccountID: id}).Account
}

// refusal is err as a refusal with its reason, limit and retry-after (detail dropped),
// or a zero refusal naming err when it is none.
func refusal(err error) ledger.Refusal {
	var r *ledger.Refusal
	if errors.As(err, &r) {
		return ledger.Refusal{Reason: r.Reason, Limit: r.Limit, RetryAfter: r.RetryAfter}
	}
	if err != nil {
		return ledger.Refusal{Detail: err.Error()}
	}
	return ledger.Refusal{}
}

func secondsUntil(from, to time.Time) int { return int(to.Sub(from).Seconds()) }
