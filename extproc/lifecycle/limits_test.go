package lifecycle_test

import (
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/internal/testkit"
)

// limitRefusals are the ledger's refusals by a key's or a project's limits, each with
// the client's error and what its message must name.
func limitRefusals() []refusal {
	rate := testkit.WantError(429, "rate_limit_exceeded", "rate_limit_error")
	spend := testkit.WantError(429, "key_limit_reached", "rate_limit_error")
	return []refusal{
		{name: "key daily spend", reserveE: &ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "daily", RetryAfter: 3600},
			w: spend.WithRetry("3600"), message: "daily spend limit (UTC day) of the key"},
		{name: "project daily spend", reserveE: &ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "project:proj_7:daily", RetryAfter: 120},
			w: spend.WithRetry("120"), message: "daily spend limit (UTC day) of project proj_7"},
		{name: "project monthly spend", reserveE: &ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "project:proj_7:monthly", RetryAfter: 86400},
			w: spend.WithRetry("86400"), message: "monthly spend limit (UTC month) of project proj_7"},
		{name: "project lifetime spend freed by a hold", reserveE: &ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "project:proj_7:lifetime", RetryAfter: 5},
			w: spend.WithRetry("5"), message: "lifetime spend limit of project proj_7"},
		// Nothing frees a lifetime limit that committed spend crossed: retryable by the
		// code (spec section 7), but no Retry-After.
		{name: "project lifetime spend used up", reserveE: &ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "project:proj_7:lifetime"},
			w: spend.WithRetry(""), message: "lifetime spend limit of project proj_7"},
		{name: "project allowlist", reserveE: &ledger.Refusal{Reason: ledger.ReasonModelNotAllowed, Limit: "project:proj_7:models"},
			w: testkit.WantError(403, "model_not_allowed", "permission_error").WithParam("model"), message: "project proj_7 does not allow the model"},
		{name: "tier rpm", reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "rpm", RetryAfter: 17},
			w: rate.WithRetry("17"), message: "account's requests-per-minute"},
		{name: "key rpm", reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "key:rpm", RetryAfter: 9},
			w: rate.WithRetry("9"), message: "requests-per-minute limit of the key"},
		{name: "project rpm", reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "project:proj_7:rpm", RetryAfter: 1},
			w: rate.WithRetry("1"), message: "requests-per-minute limit of project proj_7"},
		{name: "key tpm", reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "key:tpm", RetryAfter: 2},
			w: rate.WithRetry("2"), message: "tokens-per-minute limit of the key is used up"},
		{name: "project tpm", reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "project:proj_7:tpm", RetryAfter: 31},
			w: rate.WithRetry("31"), message: "tokens-per-minute limit of project proj_7 is used up"},
		{name: "larger than the key's tpm", reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "key:tpm"},
			w: rate.WithRetry(""), message: "larger than the tokens-per-minute limit of the key"},
		{name: "larger than a project's tpm", reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "project:proj_7:tpm"},
			w: rate.WithRetry(""), message: "larger than the tokens-per-minute limit of project proj_7"},
	}
}

// TestLimitRefusals: every refusal by a key's or a project's spend window, rpm, tpm or
// allowlist is the spec's error (status, code, type, retryable, x-should-retry,
// Retry-After) in the endpoint's envelope, on every billed endpoint, naming the limit;
// nothing is held but the one reservation the ledger refused.
func TestLimitRefusals(t *testing.T) {
	endpoints := []struct {
		name, path, body string
		anthropic        bool
		only             map[string]bool // the cases played (nil: every one)
	}{
		{name: "chat", path: "/v1/chat/completions", body: chatOK},
		{name: "messages", path: "/v1/messages", anthropic: true,
			body: `{"model":"demo-claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "responses", path: "/v1/responses", body: `{"model":"demo-responses","input":"hi"}`,
			only: map[string]bool{"project daily spend": true, "project allowlist": true, "project tpm": true, "larger than a project's tpm": true}},
		{name: "embeddings", path: "/v1/embeddings", body: `{"model":"demo-embed","input":"hi"}`,
			only: map[string]bool{"project lifetime spend used up": true, "project allowlist": true, "key tpm": true, "larger than the key's tpm": true}},
		{name: "speech", path: "/v1/audio/speech", body: `{"model":"demo-tts","input":"hello","voice":"alloy"}`,
			only: map[string]bool{"project monthly spend": true, "project allowlist": true, "project rpm": true}},
		{name: "images", path: "/v1/images/generations", body: `{"model":"demo-image","prompt":"a cat"}`,
			only: map[string]bool{"project daily spend": true, "project allowlist": true, "key rpm": true}},
		{name: "video", path: "/v1/video/generations", body: `{"model":"demo-video","prompt":"a wave"}`,
			only: map[string]bool{"project lifetime spend freed by a hold": true, "project allowlist": true, "project rpm": true}},
	}
	for _, ep := range endpoints {
		t.Run(ep.name, func(t *testing.T) {
			var cases []refusal
			for _, c := range limitRefusals() {
				if ep.only != nil && !ep.only[c.name] {
					continue
				}
				c.body, c.headers, c.reserved = ep.body, bearer(replay.KeyPaid), true
				cases = append(cases, c)
			}
			checkRefusals(t, ep.path, ep.anthropic, cases, withDNS)
		})
	}
}

// TestTokenBoundInTheRefusal: a request larger than a tpm is told its token bound.
func TestTokenBoundInTheRefusal(t *testing.T) {
	checkRefusals(t, "/v1/chat/completions", false, []refusal{{
		name: "larger than the key's tpm", headers: bearer(replay.KeyPaid), reserved: true,
		body:     `{"model":"demo-chat","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`,
		reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "key:tpm"},
		w:        testkit.WantError(429, "rate_limit_exceeded", "rate_limit_error").WithRetry(""),
		message:  "token bound (173 tokens",
	}})
}

// TestProjectAllowlistBeforeTheReserve: a grant whose projects restrict the models
// (EffectiveModels) refuses any other model with 403 model_not_allowed before anything
// is reserved, even when the key itself allows every model; an empty one refuses all.
func TestProjectAllowlistBeforeTheReserve(t *testing.T) {
	const (
		inProject = "gw-proj0000000000000000000000000000000000000000"
		nothing   = "gw-none0000000000000000000000000000000000000000"
	)
	withKeys := func(c *lifecycle.Config) {
		f := c.Ledger.(*replay.FakeLedger)
		f.AddKey(inProject, ledger.Grant{KeyID: "k-proj", AccountID: "a1", Tier: "default", AccountToppedUp: true,
			EffectiveModels: []string{"demo-free"}})
		f.AddKey(nothing, ledger.Grant{KeyID: "k-none", AccountID: "a1", Tier: "default", AccountToppedUp: true,
			EffectiveModels: []string{}})
	}
	denied := testkit.WantError(403, "model_not_allowed", "permission_error").WithParam("model")
	checkRefusals(t, "/v1/chat/completions", false, []refusal{
		{name: "chat outside the project's models", body: chatOK, headers: bearer(inProject), w: denied,
			message: "A project of this key does not allow the model 'demo-chat'"},
		{name: "chat with no model left", body: `{"model":"demo-free","messages":[{"role":"user","content":"hi"}]}`,
			headers: bearer(nothing), w: denied},
	}, withKeys)
	checkRefusals(t, "/v1/messages", true, []refusal{
		{name: "messages outside the project's models", headers: []string{"x-api-key", inProject}, w: denied,
			body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
	}, withKeys)

	f := replay.DemoLedger()
	svc := replay.Service(t, f)
	withKeys(&lifecycle.Config{Ledger: f})
	r, a := post(t, svc, "/v1/chat/completions", `{"model":"demo-free","messages":[{"role":"user","content":"hi"}]}`, bearer(inProject)...)
	mustAdmit(t, a)
	finish(t, svc, r)
}
