package machine

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// settledState is a state of 64 accounts with limited keys and n reservations
// committed within the last hour (kept for retried settlements).
func settledState(tb testing.TB, n int) *State {
	s := New()
	s.Decide(PutTier{Tier: ledger.Tier{Name: "bench", RPMBeforeTopUp: 1 << 30, RPMAfterTopUp: 1 << 30,
		InFlightGeneral: 1 << 20, InFlightHighCost: 1 << 20}, At: t0})
	const accts = 64
	keys := make([]string, accts)
	for i := range accts {
		a, k := uuidOf(1, i), uuidOf(2, i)
		s.Decide(CreateAccount{ID: a, Tier: "bench", At: t0})
		s.Decide(TopUp{AccountID: a, Amount: 1 << 50, At: t0})
		s.Decide(CreateKey{ID: k, Key: ledger.NewKey{AccountID: a, Hash: hashOf(k),
			DailyLimit: ptr[ledger.Micros](1 << 60), MonthlyLimit: ptr[ledger.Micros](1 << 60)}, At: t0})
		keys[i] = k
	}
	for i := range n {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		id := uuidOf(3, i)
		ans, _ := s.Decide(Reserve{ID: id, Request: ledger.ReserveRequest{RequestID: uuidOf(4, i), KeyID: keys[i%accts],
			Model: "m", Amount: 1000, Pool: ledger.PoolGeneral}, At: at})
		if ans.Err != nil {
			tb.Fatal(ans.Err)
		}
		s.Decide(Commit{Request: ledger.CommitRequest{ReservationID: id, Actual: 700}, At: at})
	}
	return s
}

// BenchmarkSnapshot takes a snapshot of a state holding n settled reservations
// (reported, never asserted): capture is what the decide loop pauses for, snapshot the
// whole of it (capture, values, sort) as State.Snapshot makes it; json-B/reservation is
// its encoding's size.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		s := settledState(b, n)
		b.Run(fmt.Sprintf("capture/settled=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = s.Capture()
			}
		})
		b.Run(fmt.Sprintf("snapshot/settled=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var sn Snapshot
			for b.Loop() {
				sn = s.Snapshot()
			}
			b.StopTimer()
			body, err := json.Marshal(sn)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(body))/float64(n), "json-B/reservation")
		})
	}
}
