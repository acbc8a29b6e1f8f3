package machine

import (
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// TestRenewAndExpireDue: Renew moves a held lease to At + TTL (never earlier);
// ExpireDue expires the due holds, earliest expiry first, at most Limit.
func TestRenewAndExpireDue(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 1000)
	k, _ := h.key(a, nil)
	ttl := func(d time.Duration) ledger.Reservation {
		id := h.id(3)
		return h.must(Reserve{ID: id, Request: ledger.ReserveRequest{RequestID: id, KeyID: k, Amount: 10,
			Pool: ledger.PoolGeneral, TTL: d}, At: h.now}).Reservation
	}
	r1 := ttl(time.Minute)       // due at t0+1m
	r2 := ttl(3 * time.Minute)   // renewed below to t0+2m+5m
	r3 := ttl(30 * time.Second)  // due first
	r4 := ttl(90 * time.Second)  // committed before it is due
	r5 := ttl(100 * time.Second) // due at t0+100s

	renews := []struct {
		id   string
		at   time.Time
		ttl  time.Duration
		want time.Time
	}{
		{r2.ID, t0.Add(2 * time.Minute), 5 * time.Minute, t0.Add(7 * time.Minute)},
		{r2.ID, t0.Add(2 * time.Minute), time.Minute, t0.Add(7 * time.Minute)}, // never earlier
		{r5.ID, t0, 0, t0.Add(DefaultTTL)},
		{r5.ID, t0, time.Second, t0.Add(DefaultTTL)},
	}
	for i, rn := range renews {
		if got := h.must(Renew{ReservationID: rn.id, TTL: rn.ttl, At: rn.at}).Expires; !got.Equal(rn.want) {
			t.Errorf("renew %d: expires %v, want %v", i, got, rn.want)
		}
	}
	if a, _ := h.do(Renew{ReservationID: r1.ID, TTL: -1, At: t0}); refusal(a.Err).Reason != ledger.ReasonInvalidArgument {
		t.Errorf("negative ttl: %v", a.Err)
	}
	h.must(Commit{Request: ledger.CommitRequest{ReservationID: r4.ID, Actual: 3}, At: t0})

	steps := []struct {
		at    time.Time
		limit int
		want  []string
	}{
		{t0.Add(29 * time.Second), 10, nil},
		{t0.Add(5 * time.Minute), 0, nil},
		{t0.Add(5 * time.Minute), 1, []string{r3.ID}},
		{t0.Add(5 * time.Minute), 5, []string{r1.ID}},
		{t0.Add(7 * time.Minute), 5, []string{r2.ID}},
		{t0.Add(DefaultTTL), 5, []string{r5.ID}},
		{t0.Add(time.Hour), 5, nil},
	}
	for i, st := range steps {
		ans, evs := h.do(ExpireDue{Limit: st.limit, At: st.at})
		var got []string
		for _, e := range evs {
			rel := e.(Released)
			if rel.State != ledger.StateExpired || rel.Reason != "expired" || !rel.At.Equal(st.at) {
				t.Errorf("step %d: event %+v", i, rel)
			}
			got = append(got, rel.ReservationID)
		}
		if ans.Expired != len(st.want) || len(got) != len(st.want) || (len(got) > 0 && got[0] != st.want[0]) {
			t.Errorf("step %d: expired %d %v, want %v", i, ans.Expired, got, st.want)
		}
	}
	if r := h.must(Release{ReservationID: r1.ID, At: t0}).Release; r.State != ledger.StateExpired {
		t.Errorf("release of an expired hold: %+v", r)
	}
	if a, _ := h.do(Commit{Request: ledger.CommitRequest{ReservationID: r1.ID, Actual: 1}, At: t0}); refusal(a.Err).Reason != ledger.ReasonReservationSettled {
		t.Errorf("commit of an expired hold: %v", a.Err)
	}
	if acc := h.getAccount(a); acc.Balance != 997 || acc.Reserved != 0 || acc.InFlight != 0 {
		t.Errorf("account %+v, want only r4's charge", acc)
	}
}

// TestExpiryIndexStaysSmall: settled holds' stale entries do not pile up.
func TestExpiryIndexStaysSmall(t *testing.T) {
	s := New()
	s.Decide(PutTier{Tier: ledger.Tier{Name: "big", RPMBeforeTopUp: 1 << 30, RPMAfterTopUp: 1 << 30, InFlightGeneral: 10, InFlightHighCost: 1}, At: t0})
	a, k := uuidOf(1, 1), uuidOf(2, 1)
	s.Decide(CreateAccount{ID: a, Tier: "big", At: t0})
	s.Decide(TopUp{AccountID: a, Amount: 1 << 40, At: t0})
	s.Decide(CreateKey{ID: k, Key: ledger.NewKey{AccountID: a, Hash: hashOf(k)}, At: t0})
	for i := range 5000 {
		id := uuidOf(3, i)
		if ans, _ := s.Decide(Reserve{ID: id, Request: ledger.ReserveRequest{RequestID: id, KeyID: k, Amount: 1, Pool: ledger.PoolGeneral}, At: t0}); ans.Err != nil {
			t.Fatal(ans.Err)
		}
		s.Decide(Commit{Request: ledger.CommitRequest{ReservationID: id, Actual: 1}, At: t0})
	}
	if n := len(s.expiry); n > 2048 {
		t.Errorf("expiry index holds %d entries for no held reservation", n)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
}
