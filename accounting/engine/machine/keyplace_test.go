package machine

import (
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
)

// TestCreateKeyInProject: a key created in a project with its own rates is created and
// placed in one decision; a bad placement creates nothing.
func TestCreateKeyInProject(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 0)
	other := h.account("", 0)
	p := h.project(a, "", nil)
	po := h.project(other, "", nil)
	for name, nk := range map[string]ledger.NewKey{
		"another account's project": {ProjectID: po},
		"an unknown project":        {ProjectID: "nope"},
		"a zero rpm":                {RPM: ptr[int64](0)},
		"a negative tpm":            {ProjectID: p, TPM: ptr[int64](-5)},
	} {
		nk.AccountID, nk.Hash = a, hashOf(name)
		if ans, evs := h.do(CreateKey{ID: h.id(2), Key: nk, At: h.now}); ledger.ReasonOf(ans.Err) != ledger.ReasonInvalidArgument || len(evs) != 0 {
			t.Fatalf("%s: %v, %d events", name, ans.Err, len(evs))
		}
	}
	if n := len(h.s.Snapshot().Keys); n != 0 {
		t.Fatalf("%d keys after refusals", n)
	}
	id := h.id(2)
	ans, evs := h.do(CreateKey{ID: id, Key: ledger.NewKey{AccountID: a, Hash: hashOf(id), ProjectID: p,
		RPM: ptr[int64](7), TPM: ptr[int64](700)}, At: h.now})
	if ans.Err != nil || len(evs) != 2 {
		t.Fatalf("create in a project: %v, %d events", ans.Err, len(evs))
	}
	if k := ans.Key; k.ProjectID != p || *k.RPM != 7 || *k.TPM != 700 {
		t.Fatalf("created key %+v", k)
	}
}

// TestUpdateKeyPlacement: UpdateKey moves a key and sets its rates with its other
// settings in one decision; an invalid placement changes nothing at all.
func TestUpdateKeyPlacement(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 0)
	p := h.project(a, "", nil)
	k, _ := h.key(a, nil)
	upd := func(u ledger.KeyUpdate) (Answer, []Event) {
		u.ID = k
		return h.do(UpdateKey{Update: u, At: h.now})
	}
	if ans, evs := upd(ledger.KeyUpdate{Name: ledger.To("renamed"), ProjectID: ledger.To("nope")}); ledger.ReasonOf(ans.Err) != ledger.ReasonInvalidArgument || len(evs) != 0 {
		t.Fatalf("into an unknown project: %v, %d events", ans.Err, len(evs))
	}
	if got := h.getKey(k); got.Name != "" {
		t.Fatalf("a refused update renamed the key: %+v", got)
	}
	ans, evs := upd(ledger.KeyUpdate{Name: ledger.To("renamed"), ProjectID: ledger.To(p), TPM: ledger.To(ptr[int64](9))})
	if ans.Err != nil || len(evs) != 2 || ans.Key.ProjectID != p || ans.Key.Name != "renamed" || *ans.Key.TPM != 9 {
		t.Fatalf("move and rename: %v, %d events, %+v", ans.Err, len(evs), ans.Key)
	}
	if _, evs := upd(ledger.KeyUpdate{ProjectID: ledger.To(p)}); len(evs) != 0 {
		t.Fatalf("moving into its own project: %d events", len(evs))
	}
	ans, evs = upd(ledger.KeyUpdate{ProjectID: ledger.To(""), TPM: ledger.To[*int64](nil)})
	if len(evs) != 1 || ans.Key.ProjectID != "" || ans.Key.TPM != nil {
		t.Fatalf("out of the project: %d events, %+v", len(evs), ans.Key)
	}
	h.must(DeleteProject{ProjectID: p, At: h.now})
}
