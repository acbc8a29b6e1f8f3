package machine

import (
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

func TestGraceLapsedRenewsOnlyLapsedHolds(t *testing.T) {
	s := New()
	t0 := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	s.Decide(PutTier{Tier: ledger.Tier{Name: "bulk", RPMBeforeTopUp: 100, RPMAfterTopUp: 100, InFlightGeneral: 100, InFlightHighCost: 100}, At: t0})
	s.Decide(CreateAccount{ID: "a", Tier: "bulk", At: t0})
	s.Decide(TopUp{AccountID: "a", Amount: 1000, At: t0})
	h := make([]byte, 32)
	s.Decide(CreateKey{ID: "k", Key: ledger.NewKey{AccountID: "a", Hash: h}, At: t0})
	for i, ttl := range []time.Duration{time.Second, 2 * time.Second, time.Hour} {
		ans, _ := s.Decide(Reserve{ID: string(rune('x' + i)), Request: ledger.ReserveRequest{RequestID: string(rune('a' + i)), KeyID: "k", Amount: 10, Pool: ledger.PoolGeneral, TTL: ttl}, At: t0})
		if ans.Err != nil {
			t.Fatal(ans.Err)
		}
	}
	at := t0.Add(10 * time.Second)
	ans, evs := s.Decide(GraceLapsed{Grace: 30 * time.Second, At: at})
	if ans.Err != nil || ans.Expired != 2 || len(evs) != 2 {
		t.Fatalf("GraceLapsed: %+v, %d events; want the two lapsed holds renewed", ans, len(evs))
	}
	if ans, _ := s.Decide(ExpireDue{Limit: 10, At: at.Add(29 * time.Second)}); ans.Expired != 0 {
		t.Fatalf("%d holds expired inside their grace", ans.Expired)
	}
	if ans, _ := s.Decide(ExpireDue{Limit: 10, At: at.Add(30 * time.Second)}); ans.Expired != 2 {
		t.Fatalf("%d holds expired at the grace's end, want 2", ans.Expired)
	}
	if ans, _ := s.Decide(ListTiers{}); len(ans.Tiers) != 4 || ans.Tiers[0].Name != "bulk" {
		t.Fatalf("ListTiers: %+v", ans.Tiers)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}
