package machine

import (
	"reflect"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// TestCaptureWhileDeciding takes a capture of a state with held and settled
// reservations (some in a project with a token rate), then makes its snapshot on
// another goroutine while the state goes on deciding: settling the held ones,
// retrying settled ones' commits, reserving more, releasing, forgetting the settled
// ones. The snapshot must be the one the state had at the capture, and (run with
// -race) nothing the state does after it may touch what the capture reads.
func TestCaptureWhileDeciding(t *testing.T) {
	s := New()
	tpm := ptr[int64](1 << 30)
	s.Decide(PutTier{Tier: ledger.Tier{Name: "t", RPMBeforeTopUp: 1 << 30, RPMAfterTopUp: 1 << 30,
		InFlightGeneral: 1 << 20, InFlightHighCost: 1 << 20}, At: t0})
	const accts, per = 4, 200
	keys := make([]string, accts)
	for i := range accts {
		a, k, p := uuidOf(1, i), uuidOf(2, i), uuidOf(5, i)
		mustDecide(t, s, CreateAccount{ID: a, Tier: "t", At: t0})
		mustDecide(t, s, TopUp{AccountID: a, Amount: 1 << 40, At: t0})
		mustDecide(t, s, CreateKey{ID: k, Key: ledger.NewKey{AccountID: a, Hash: hashOf(k),
			DailyLimit: ptr[ledger.Micros](1 << 40)}, At: t0})
		mustDecide(t, s, CreateProject{ID: p, Project: ledger.NewProject{AccountID: a, Name: "p", TPM: tpm,
			Limit: ptr[ledger.Micros](1 << 40)}, At: t0})
		if i%2 == 0 {
			mustDecide(t, s, PlaceKey{Placement: ledger.KeyPlacement{KeyID: k, ProjectID: ledger.To(p),
				TPM: ledger.To(tpm)}, At: t0})
		}
		keys[i] = k
	}
	n := 0
	reserve := func(at time.Time) string {
		n++
		id := uuidOf(3, n)
		mustDecide(t, s, Reserve{ID: id, Request: ledger.ReserveRequest{RequestID: uuidOf(4, n), KeyID: keys[n%accts],
			Model: "m", Amount: 1000, Pool: ledger.PoolGeneral, Tokens: 100}, At: at})
		return id
	}
	var settled, held []string
	for i := range accts * per {
		id := reserve(t0)
		switch {
		case i%3 == 0:
			held = append(held, id)
		case i%3 == 1:
			mustDecide(t, s, Commit{Request: ledger.CommitRequest{ReservationID: id, Actual: 700,
				Usage: ledger.Usage{InputTokens: 10, OutputTokens: 20}}, At: t0})
			settled = append(settled, id)
		default:
			mustDecide(t, s, Release{ReservationID: id, Reason: "r", At: t0})
			settled = append(settled, id)
		}
	}

	want := s.Snapshot()
	if len(want.Reservations) != len(held)+len(settled) {
		t.Fatalf("snapshot of %d reservations, want %d", len(want.Reservations), len(held)+len(settled))
	}
	c := s.Capture()
	got := make(chan Snapshot)
	go func() { got <- c.Snapshot() }()

	later := t0.Add(time.Minute)
	for i, id := range held {
		if i%2 == 0 {
			mustDecide(t, s, Commit{Request: ledger.CommitRequest{ReservationID: id, Actual: 900}, At: later})
		} else {
			mustDecide(t, s, Release{ReservationID: id, Reason: "late", At: later})
		}
	}
	for i, id := range settled {
		if i%2 == 0 {
			// A retried settlement: answered, nothing changes.
			s.Decide(Commit{Request: ledger.CommitRequest{ReservationID: id, Actual: 700}, At: later})
		}
	}
	for range 100 {
		reserve(later)
	}
	if _, evs := s.Decide(Forget{Before: later, At: later}); len(evs) == 0 {
		t.Fatal("Forget forgot nothing")
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}

	if sn := <-got; !reflect.DeepEqual(sn, want) {
		t.Errorf("the capture's snapshot differs from the state's at the capture:\n%s", snapshotDiff(sn, want))
	}
	if now := s.Snapshot(); reflect.DeepEqual(now, want) {
		t.Error("the state did not change after the capture: the test proves nothing")
	}
}

func mustDecide(t *testing.T, s *State, c Command) {
	t.Helper()
	if ans, _ := s.Decide(c); ans.Err != nil {
		t.Fatalf("%#v: %v", c, ans.Err)
	}
}
