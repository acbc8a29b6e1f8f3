package replay

import "testing"

// CheckCharged asserts the ledger saw exactly one hold of amount hold and one commit of
// actual, and no release: a request admitted, answered and charged once.
func (f *FakeLedger) CheckCharged(t testing.TB, hold, actual int64) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.Reserves) != 1 || f.Reserves[0].Amount != hold {
		t.Errorf("reserves %+v, want one hold of %d", f.Reserves, hold)
	}
	if len(f.Commits) != 1 || f.Commits[0].Actual != actual || len(f.Releases) != 0 {
		t.Errorf("commits %+v releases %v, want one commit of %d", f.Commits, f.Releases, actual)
	}
}
