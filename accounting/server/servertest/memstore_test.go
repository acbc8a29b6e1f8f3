package servertest

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

var ctx = context.Background()

// account returns a new account of tier with balance and one key.
func account(t *testing.T, m *Memory, tier string, balance ledger.Micros, name string) (ledger.Account, ledger.Key) {
	t.Helper()
	a, err := m.CreateAccount(ctx, ledger.NewAccount{Tier: tier})
	if err != nil {
		t.Fatal(err)
	}
	if balance > 0 {
		if _, err := m.TopUp(ctx, a.ID, balance, ""); err != nil {
			t.Fatal(err)
		}
	}
	h := sha256.Sum256([]byte(name))
	k, err := m.CreateKey(ctx, ledger.NewKey{AccountID: a.ID, Name: name, Hash: h[:], AllowedModels: []string{"m"}})
	if err != nil {
		t.Fatal(err)
	}
	return a, k
}

func reason(err error) ledger.Reason {
	var r *ledger.Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return -1
}

// Ids share one sequence and a refused or replayed creation uses none.
func TestMemoryIDs(t *testing.T) {
	m := NewMemory()
	if _, err := m.CreateAccount(ctx, ledger.NewAccount{Tier: "no-such-tier"}); reason(err) != ledger.ReasonInvalidArgument {
		t.Fatalf("unknown tier: %v", err)
	}
	a, k := account(t, m, "", 1_000, "k1")
	if a.ID != "acct_000001" || k.ID != "key_000002" {
		t.Fatalf("ids %s %s", a.ID, k.ID)
	}
	req := ledger.ReserveRequest{RequestID: "r1", KeyID: k.ID, Model: "m", Amount: 10, Pool: ledger.PoolGeneral}
	for range 2 { // the second is a replay
		r, err := m.Reserve(ctx, req)
		if err != nil || r.ID != "res_000003" {
			t.Fatalf("reserve: %+v %v", r, err)
		}
	}
	if _, err := m.Reserve(ctx, ledger.ReserveRequest{RequestID: "r2", KeyID: k.ID, Amount: 5_000, Pool: ledger.PoolGeneral}); reason(err) != ledger.ReasonInsufficientCredits {
		t.Fatalf("reserve beyond credits: %v", err)
	}
	a2, err := m.CreateAccount(ctx, ledger.NewAccount{Tier: "tight"})
	if err != nil || a2.ID != "acct_000004" {
		t.Fatalf("next account %+v %v", a2, err)
	}
}

// FailNext's errors are taken one per call, listings included, before any decision.
func TestMemoryFailNext(t *testing.T) {
	m := NewMemory()
	a, _ := account(t, m, "", 0, "k1")
	e1, e2 := errors.New("one"), errors.New("two")
	m.FailNext(e1, e2)
	if _, err := m.ListKeys(ctx, a.ID); err != e1 {
		t.Fatalf("first call: %v", err)
	}
	if _, err := m.TopUp(ctx, a.ID, 5, ""); err != e2 {
		t.Fatalf("second call: %v", err)
	}
	got, err := m.GetAccount(ctx, a.ID)
	if err != nil || got.Balance != 0 {
		t.Fatalf("after the injected errors: %+v %v (the failed top-up must not count)", got, err)
	}
	keys, err := m.ListKeys(ctx, a.ID)
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %+v %v", keys, err)
	}
}

// The fake holds accounts to the ledger's limits: tiers' pools and rates, key spend
// limits, argument checks.
func TestMemoryLedgerRules(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	m := NewMemory()
	m.Now = func() time.Time { return now }
	_, tight := account(t, m, "tight", 1_000, "tight")
	_, keyed := account(t, m, "", 1_000, "keyed")
	limit := ledger.Micros(100)
	if _, err := m.UpdateKey(ctx, ledger.KeyUpdate{ID: keyed.ID, DailyLimit: ledger.Set[*ledger.Micros]{Set: true, Value: &limit}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		req  ledger.ReserveRequest
		want ledger.Reason
	}{
		{"first of the tight pool", ledger.ReserveRequest{RequestID: "t1", KeyID: tight.ID, Amount: 1, Pool: ledger.PoolGeneral}, 0},
		{"second of the tight pool", ledger.ReserveRequest{RequestID: "t2", KeyID: tight.ID, Amount: 1, Pool: ledger.PoolGeneral}, 0},
		{"tight pool full", ledger.ReserveRequest{RequestID: "t3", KeyID: tight.ID, Amount: 1, Pool: ledger.PoolGeneral}, ledger.ReasonConcurrencyLimitExceeded},
		{"within the daily limit", ledger.ReserveRequest{RequestID: "k1", KeyID: keyed.ID, Amount: 100, Pool: ledger.PoolGeneral}, 0},
		{"beyond the daily limit", ledger.ReserveRequest{RequestID: "k2", KeyID: keyed.ID, Amount: 1, Pool: ledger.PoolGeneral}, ledger.ReasonKeyLimitReached},
		{"no request id", ledger.ReserveRequest{KeyID: keyed.ID, Pool: ledger.PoolGeneral}, ledger.ReasonInvalidArgument},
		{"no pool", ledger.ReserveRequest{RequestID: "k4", KeyID: keyed.ID}, ledger.ReasonInvalidArgument},
		{"negative amount", ledger.ReserveRequest{RequestID: "k3", KeyID: keyed.ID, Amount: -1, Pool: ledger.PoolGeneral}, ledger.ReasonInvalidArgument},
	} {
		_, err := m.Reserve(ctx, c.req)
		if c.want == 0 && err != nil || c.want != 0 && reason(err) != c.want {
			t.Errorf("%s: %v, want reason %v", c.name, err, c.want)
		}
	}
}

// Answers do not share memory with the fake's state.
func TestMemoryAnswersAreCopies(t *testing.T) {
	m := NewMemory()
	_, k := account(t, m, "", 0, "k1")
	k.AllowedModels[0] = "changed"
	h := m.HashOf(k.ID)
	h[0] ^= 0xff
	got, err := m.GetKey(ctx, k.ID)
	if err != nil || got.AllowedModels[0] != "m" {
		t.Fatalf("key %+v %v", got, err)
	}
	want := sha256.Sum256([]byte("k1"))
	if g, err := m.Authenticate(ctx, want[:]); err != nil || g.KeyID != k.ID {
		t.Fatalf("authenticate after changing HashOf's answer: %+v %v", g, err)
	}
}
