package machine

import (
	"fmt"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// BenchmarkReserveCommit decides a Reserve and its Commit per iteration on one of 64
// accounts with limited keys (reported, never asserted).
func BenchmarkReserveCommit(b *testing.B) {
	s := New()
	s.Decide(PutTier{Tier: ledger.Tier{Name: "bench", RPMBeforeTopUp: 1 << 30, RPMAfterTopUp: 1 << 30,
		InFlightGeneral: 1 << 20, InFlightHighCost: 1 << 20}, At: t0})
	const n = 64
	keys := make([]string, n)
	for i := range n {
		a, k := uuidOf(1, i), uuidOf(2, i)
		s.Decide(CreateAccount{ID: a, Tier: "bench", At: t0})
		s.Decide(TopUp{AccountID: a, Amount: 1 << 50, At: t0})
		s.Decide(CreateKey{ID: k, Key: ledger.NewKey{AccountID: a, Hash: hashOf(k),
			DailyLimit: ptr[ledger.Micros](1 << 60), MonthlyLimit: ptr[ledger.Micros](1 << 60)}, At: t0})
		keys[i] = k
	}
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = uuidOf(3, i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		at := t0.Add(1000 * 1000 * 1000)
		ans, _ := s.Decide(Reserve{ID: ids[i], Request: ledger.ReserveRequest{RequestID: ids[i], KeyID: keys[i%n],
			Model: "m", Amount: 1000, Pool: ledger.PoolGeneral}, At: at})
		if ans.Err != nil {
			b.Fatal(ans.Err)
		}
		s.Decide(Commit{Request: ledger.CommitRequest{ReservationID: ids[i], Actual: 700}, At: at})
	}
}

// BenchmarkAuthenticate resolves a key hash.
func BenchmarkAuthenticate(b *testing.B) {
	s := New()
	s.Decide(CreateAccount{ID: uuidOf(1, 1), At: t0})
	k := uuidOf(2, 1)
	s.Decide(CreateKey{ID: k, Key: ledger.NewKey{AccountID: uuidOf(1, 1), Hash: hashOf(k)}, At: t0})
	c := Authenticate{Hash: hashOf(k), At: t0}
	b.ReportAllocs()
	for b.Loop() {
		if ans, _ := s.Decide(c); ans.Err != nil {
			b.Fatal(ans.Err)
		}
	}
}

// BenchmarkReserveCommitProjects decides a Reserve and its Commit per iteration on a
// key in no project and on a key three projects deep, each project with daily,
// monthly and lifetime limits, an rpm, a tpm and an allowlist (reported, never
// asserted: compare the two in one run).
func BenchmarkReserveCommitProjects(b *testing.B) {
	for _, depth := range []int{0, 3} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			s := New()
			s.Decide(PutTier{Tier: ledger.Tier{Name: "bench", RPMBeforeTopUp: 1 << 30, RPMAfterTopUp: 1 << 30,
				InFlightGeneral: 1 << 20, InFlightHighCost: 1 << 20}, At: t0})
			const n = 64
			keys := make([]string, n)
			big := ptr[ledger.Micros](1 << 60)
			for i := range n {
				a, k := uuidOf(1, i), uuidOf(2, i)
				s.Decide(CreateAccount{ID: a, Tier: "bench", At: t0})
				s.Decide(TopUp{AccountID: a, Amount: 1 << 50, At: t0})
				s.Decide(CreateKey{ID: k, Key: ledger.NewKey{AccountID: a, Hash: hashOf(k),
					DailyLimit: big, MonthlyLimit: big}, At: t0})
				parent := ""
				for level := range depth {
					p := uuidOf(5, i*8+level)
					if ans, _ := s.Decide(CreateProject{ID: p, Project: ledger.NewProject{AccountID: a, ParentID: parent,
						Name: "p", DailyLimit: big, MonthlyLimit: big, Limit: big, RPM: ptr[int64](1 << 30),
						TPM: ptr[int64](1 << 30), Models: []string{"x", "m"}}, At: t0}); ans.Err != nil {
						b.Fatal(ans.Err)
					}
					parent = p
				}
				if parent != "" {
					s.Decide(PlaceKey{Placement: ledger.KeyPlacement{KeyID: k, ProjectID: ledger.To(parent)}, At: t0})
				}
				keys[i] = k
			}
			ids := make([]string, b.N)
			for i := range ids {
				ids[i] = uuidOf(3, i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				at := t0.Add(time.Duration(i) * time.Microsecond)
				ans, _ := s.Decide(Reserve{ID: ids[i], Request: ledger.ReserveRequest{RequestID: ids[i], KeyID: keys[i%n],
					Model: "m", Amount: 1000, Pool: ledger.PoolGeneral, Tokens: 2000}, At: at})
				if ans.Err != nil {
					b.Fatal(ans.Err)
				}
				s.Decide(Commit{Request: ledger.CommitRequest{ReservationID: ids[i], Actual: 700,
					Usage: ledger.Usage{InputTokens: 500, OutputTokens: 300}}, At: at})
			}
		})
	}
}
