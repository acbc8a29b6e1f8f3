package lifecycle_test

import (
	"context"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
)

// TestUnknownModelRefusalSaysTheModel: the facts of a refusal for a model the catalog
// does not know (the access log's) name the model that was asked for.
func TestUnknownModelRefusalSaysTheModel(t *testing.T) {
	f := &replay.FakeLedger{}
	f.AddKey(secKey, ledger.Grant{KeyID: "k-sec", AccountID: "a-sec", Tier: "default", AccountToppedUp: true})
	svc := replay.Service(t, f)
	ctx := context.Background()
	r := svc.NewRequest()
	r.RequestHeaders(ctx, secHeaders("/v1/chat/completions"), false)
	a := r.RequestBody(ctx, []byte(`{"model":"demo-chta","messages":[{"role":"user","content":"hi"}]}`), true)
	r.End(ctx, "done")
	if a.Immediate == nil || a.Facts == nil || a.Facts.Error != "model_not_available" || a.Facts.Model != "demo-chta" {
		t.Fatalf("facts %+v, want model_not_available for model demo-chta", a.Facts)
	}
}
