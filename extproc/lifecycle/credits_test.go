package lifecycle_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
)

// TestInsufficientCreditsSaysHoldAndAvailable: the 402 says the request's hold and the
// account's available credits, in credits, and how to lower the hold: the output-token
// field the client sent, or the one its API uses with the model's maximum held without it.
func TestInsufficientCreditsSaysHoldAndAvailable(t *testing.T) {
	available := ledger.Micros(1000)
	for _, tt := range []struct {
		name, path, body string
		want             []string
	}{
		{"chat without a limit", "/v1/chat/completions", `{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`,
			[]string{"; the account has 0.001 credits available", "Set a lower 'max_tokens' (without it the model's maximum, 4096 output tokens, is held)"}},
		{"chat with max_completion_tokens", "/v1/chat/completions", `{"model":"demo-chat","max_completion_tokens":4000,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"0.001 credits available", "Lower 'max_completion_tokens' (4000 output tokens are held)"}},
		{"responses", "/v1/responses", `{"model":"demo-responses","input":"hi"}`,
			[]string{"0.001 credits available", "Set a lower 'max_output_tokens'"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &replay.FakeLedger{ReserveE: &ledger.Refusal{Reason: ledger.ReasonInsufficientCredits, Available: &available}}
			f.AddKey(secKey, ledger.Grant{KeyID: "k-sec", AccountID: "a-sec", Tier: "default", AccountToppedUp: true})
			svc := replay.Service(t, f)
			ctx := context.Background()
			r := svc.NewRequest()
			r.RequestHeaders(ctx, secHeaders(tt.path), false)
			a := r.RequestBody(ctx, []byte(tt.body), true)
			r.End(ctx, "done")
			if a.Immediate == nil || a.Immediate.Status != 402 {
				t.Fatalf("answer %+v, want 402", a)
			}
			var env struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(a.Immediate.Body, &env); err != nil || env.Error.Code != "insufficient_credits" {
				t.Fatalf("body %s", a.Immediate.Body)
			}
			hold := "This request holds " + ledger.FormatCredits(f.Reserves[0].Amount) + " credits (its maximum estimated cost)"
			for _, w := range append(tt.want, hold) {
				if !strings.Contains(env.Error.Message, w) {
					t.Errorf("message %q lacks %q", env.Error.Message, w)
				}
			}
		})
	}

	// A ledger that does not say what was available: the hold alone.
	f := &replay.FakeLedger{ReserveE: &ledger.Refusal{Reason: ledger.ReasonInsufficientCredits}}
	f.AddKey(secKey, ledger.Grant{KeyID: "k-sec", AccountID: "a-sec", Tier: "default", AccountToppedUp: true})
	svc := replay.Service(t, f)
	ctx := context.Background()
	r := svc.NewRequest()
	r.RequestHeaders(ctx, secHeaders("/v1/chat/completions"), false)
	a := r.RequestBody(ctx, []byte(`{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`), true)
	r.End(ctx, "done")
	if a.Immediate == nil || !strings.Contains(string(a.Immediate.Body), "more than the account has available") {
		t.Fatalf("answer %+v", a)
	}
}
