package machine

import (
	"reflect"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
)

// TestGrantEffectiveModels: a key's grant carries what it may call once its projects'
// allowlists apply — its own allowlist intersected with every project's on its path —
// nil when no project restricts, empty when nothing is left; and it follows the key's
// moves and the projects' changes.
func TestGrantEffectiveModels(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 0)
	top := h.project(a, "", func(np *ledger.NewProject) { np.Models = []string{"a", "b", "c"} })
	mid := h.project(a, top, nil)
	low := h.project(a, mid, func(np *ledger.NewProject) { np.Models = []string{"c", "b", "x"} })
	open := h.project(a, "", nil)
	all, allHash := h.key(a, nil)
	scoped, scopedHash := h.key(a, func(nk *ledger.NewKey) { nk.AllowedModels = []string{"b", "a", "x"} })
	grant := func(hash []byte) []string {
		t.Helper()
		return h.must(Authenticate{Hash: hash, At: h.now}).Grant.EffectiveModels
	}
	check := func(name string, got, want []string) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: effective models %#v, want %#v", name, got, want)
		}
	}
	check("no project", grant(allHash), nil)
	check("scoped key, no project", grant(scopedHash), nil)
	h.place(all, open)
	check("unrestricted project", grant(allHash), nil)
	h.place(all, mid)
	check("a restricting ancestor", grant(allHash), []string{"a", "b", "c"})
	h.place(all, low)
	check("nearest project's order, every ancestor applied", grant(allHash), []string{"c", "b"})
	h.place(scoped, low)
	check("the key's own list, every project applied", grant(scopedHash), []string{"b"})
	h.must(UpdateProject{Update: ledger.ProjectUpdate{ID: low, Models: ledger.To([]string{"x"})}, At: h.now})
	check("nothing left", grant(scopedHash), []string{})
	h.must(UpdateProject{Update: ledger.ProjectUpdate{ID: top, Models: ledger.To[[]string](nil)}, At: h.now})
	check("a project opened", grant(scopedHash), []string{"x"})
}
