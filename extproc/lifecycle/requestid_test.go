package lifecycle_test

import (
	"context"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestEveryLogLineCarriesTheRequestID: a request whose answer lacks usage logs a warning
// and then its settlement record; both carry Envoy's x-request-id (the id the client got
// back), exactly once.
func TestEveryLogLineCarriesTheRequestID(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	f := &replay.FakeLedger{}
	f.AddKey(secKey, ledger.Grant{KeyID: "k-sec", AccountID: "a-sec", Tier: "default", AccountToppedUp: true})
	svc := replay.Service(t, f, func(c *lifecycle.Config) { c.Log = zap.New(core) })
	const id = "6f1c1b52-8c0e-4c1d-9d7a-2f4e2b1a9c30"
	r := svc.NewRequest()
	ctx := context.Background()
	r.RequestHeaders(ctx, secHeaders("/v1/chat/completions", lifecycle.Header{Name: "x-request-id", Value: id}), false)
	if a := r.RequestBody(ctx, []byte(`{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`), true); a.Immediate != nil {
		t.Fatalf("refused: %s", a.Immediate.Body)
	}
	r.ResponseHeaders(ctx, 200, []lifecycle.Header{{":status", "200"}, {"content-type", "application/json"}}, false)
	r.ResponseBody(ctx, []byte(`{"id":"c","object":"chat.completion","model":"mock-gpt","choices":[]}`), true)
	r.End(ctx, "done")
	if err := svc.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	entries := logs.All()
	if len(entries) < 2 {
		t.Fatalf("%d log lines, want the warning and the settlement record", len(entries))
	}
	settled := false
	for _, e := range entries {
		n := 0
		for _, fl := range e.Context {
			if fl.Key == "request_id" {
				n++
				if fl.String != id {
					t.Errorf("%q: request_id %q, want %q", e.Message, fl.String, id)
				}
			}
		}
		if n != 1 {
			t.Errorf("%q carries request_id %d times, want once", e.Message, n)
		}
		settled = settled || e.Message == "settled"
	}
	if !settled {
		t.Error("no settlement record")
	}
}
