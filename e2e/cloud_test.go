package e2e_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
)

// cloudModels are the demo models of LOCAL-STACK.md's "Models on every cloud", each
// served by a mock provider speaking its cloud's API.
var cloudModels = []chatModel{
	{"demo-gemini", 1_000_000, 2_000_000},
	{"demo-vertex-gemini", 1_000_000, 2_000_000},
	{"demo-vertex-claude", 3_000_000, 15_000_000},
	{"demo-bedrock", 3_000_000, 15_000_000},
	{"demo-azure", 1_000_000, 2_000_000},
	{"demo-multicloud", 1_000_000, 2_000_000},
}

// selectedCloudModels are cloudModels narrowed by CLOUD_MODELS (comma-separated ids).
func selectedCloudModels() []chatModel {
	only := os.Getenv("CLOUD_MODELS")
	if only == "" {
		return cloudModels
	}
	var models []chatModel
	for _, m := range cloudModels {
		if strings.Contains(","+only+",", ","+m.id+",") {
			models = append(models, m)
		}
	}
	return models
}

// TestCloudModelsThroughAnyChatAPI: every cloud demo model answers on every chat API
// through the official SDKs, text, limit, image and tool round trip, streamed and not,
// charged exactly the card's price of the usage the mock reported. demo-multicloud is
// answered by its third channel (Azure's) and charged once.
func TestCloudModelsThroughAnyChatAPI(t *testing.T) {
	t.Parallel()
	throughEveryChatAPI(t, selectedCloudModels())
}

// TestCloudStopSequences: a stop sequence reaches every cloud's API and ends the answer
// before it, streamed or not. A Messages client learns which sequence matched only
// from an upstream that names it (Claude on Vertex). Gemini and OpenAI say a plain
// stop; Bedrock's Converse says stop_sequence without naming it: a Messages client
// sees end_turn from those.
func TestCloudStopSequences(t *testing.T) {
	t.Parallel()
	saysSequence := map[string]bool{"demo-vertex-claude": true}
	for _, api := range chatAPIs {
		if api.name == "responses" {
			continue // the Responses API has no stop sequences
		}
		for _, m := range selectedCloudModels() {
			t.Run(api.name+"/"+m.id, func(t *testing.T) {
				t.Parallel()
				c := newCustomer(t, customerOpts{topup: "10"})
				balance := c.balance(t)
				for _, stream := range []bool{false, true} {
					a := api.do(t, c.key, call{model: m.id, prompt: "alpha beta gamma delta", stream: stream, stop: []string{"gamma"}})
					want := finishStop
					if api.name == "messages" && saysSequence[m.id] {
						want = finishSeq
					}
					if a.finish != want || a.text == "" || strings.Contains(a.text, "gamma") || strings.Contains(a.text, "delta") {
						t.Errorf("stream %v: %+v, want finish %s before gamma", stream, a, want)
					}
					now := micros(t, c.waitSettled(t), "balance")
					if got, want := balance-now, tokenCost(a.in, a.out, m.inPerM, m.outPerM); got != want || want == 0 {
						t.Errorf("stream %v: charged %d, want %d", stream, got, want)
					}
					balance = now
				}
			})
		}
	}
}

// TestCloudCacheReadsPricedByCard: Gemini's cachedContentTokenCount (inside its prompt
// count) and Bedrock's cacheReadInputTokens (beside its input) reach the client as
// cache reads and are charged at the card's cache_read price. Bedrock writes to its
// cache only under a cachePoint block, which no client request here carries: the
// cache_write directive reports nothing, and nothing is charged for it.
func TestCloudCacheReadsPricedByCard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gemini := rates{in: 1_000_000, read: 250_000, out: 2_000_000}
	bedrock := rates{in: 3_000_000, read: 300_000, write: 3_750_000, out: 15_000_000}
	t.Run("chat to gemini", func(t *testing.T) {
		t.Parallel()
		c := newCustomer(t, customerOpts{topup: "10"})
		before := c.balance(t)
		oc := openaiClient(c.key)
		r, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "demo-gemini",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("one two three four five six [[mock:cache_read=5]] [[mock:tokens=4]]")},
		})
		if err != nil {
			t.Fatal(err)
		}
		u := r.Usage
		if u.PromptTokensDetails.CachedTokens != 5 || u.CompletionTokens != 4 {
			t.Fatalf("usage %+v", u)
		}
		chargedExactly(t, c, before, gemini.cost(u.PromptTokens-5, 5, 0, 0, u.CompletionTokens))
	})
	t.Run("messages to bedrock", func(t *testing.T) {
		t.Parallel()
		c := newCustomer(t, customerOpts{topup: "10"})
		before := c.balance(t)
		ac := anthropicClient(c.key)
		m, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
			Model: "demo-bedrock", MaxTokens: 50,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("one two three four five six [[mock:cache_read=4]] [[mock:cache_write=2]] [[mock:tokens=3]]"))},
		})
		if err != nil {
			t.Fatal(err)
		}
		u := m.Usage
		if u.CacheReadInputTokens != 4 || u.CacheCreationInputTokens != 0 || u.OutputTokens != 3 {
			t.Fatalf("usage %+v", u)
		}
		chargedExactly(t, c, before, bedrock.cost(u.InputTokens, 4, 0, 0, u.OutputTokens))
	})
}

// TestCloudMulticloudFailsOverOnRefusedCredentials: demo-multicloud's Bedrock channel
// signs with a wrong secret (the mock Bedrock refuses the signature: an account refusal)
// and its Vertex channel's token endpoint refuses the grant (the gateway has no
// credential for it, so that channel is skipped and sent nothing): the request is
// answered by the Azure channel and charged once, and the next request finds both
// cooling and reaches Azure alone. Not parallel: it runs before any other test used
// demo-multicloud, so the first request finds no channel cooling.
func TestCloudMulticloudFailsOverOnRefusedCredentials(t *testing.T) {
	attempts := func(m map[string]float64, channel, outcome string) float64 {
		return m[series("gateway_channel_attempts_total", "channel", channel, "outcome", outcome)]
	}
	refused := map[string]string{"multicloud-1-bedrock-refused": "account", "multicloud-2-vertex-refused": "credential"}
	wantRefusals := []string{"/model/mock-claude/converse: InvalidSignatureException"}
	for i, api := range []chatAPI{chatAPIs[0], chatAPIs[1]} {
		c := newCustomer(t, customerOpts{topup: "10"}) // one request per key: chargedExactly
		before := scrape(t, gw.ExtprocMetricsAddr)
		balance := c.balance(t)
		probe := fmt.Sprintf("multicloud-%d", probeSeq.Add(1))
		a := api.do(t, c.key, call{model: "demo-multicloud", prompt: "which cloud [[mock:tokens=3]] [[mock:probe=" + probe + "]]", stream: i == 1})
		if a.text == "" || a.out != 3 {
			t.Fatalf("%s: %+v", api.name, a)
		}
		chargedExactly(t, c, balance, tokenCost(a.in, a.out, 1_000_000, 2_000_000))
		p, _ := findMockProbe(t, probe)
		after := scrape(t, gw.ExtprocMetricsAddr)
		if p.Uncredentialed != 0 {
			t.Errorf("%s: %d requests reached the mock without a credential, want none", api.name, p.Uncredentialed)
		}
		if i == 0 {
			// The first request reaches Bedrock, refused, then Azure; Vertex, without its
			// token, gets nothing.
			if p.Attempts != 2 || !slices.Equal(p.Refusals, wantRefusals) {
				t.Errorf("first request at the mock: %d attempts, refusals %q; want 2, %q", p.Attempts, p.Refusals, wantRefusals)
			}
			for ch, outcome := range refused {
				if got := attempts(after, ch, outcome) - attempts(before, ch, outcome); got != 1 {
					t.Errorf("%s: %v %s failures counted, want 1", ch, got, outcome)
				}
			}
			continue
		}
		// The refused channels cool: the second request reaches Azure alone.
		if p.Attempts != 1 || len(p.Refusals) != 0 {
			t.Errorf("second request at the mock: %d attempts, refusals %q; want Azure's alone", p.Attempts, p.Refusals)
		}
		for ch, outcome := range refused {
			if got := attempts(after, ch, outcome) - attempts(before, ch, outcome); got != 0 {
				t.Errorf("%s: tried while cooling (%v more %s failures)", ch, got, outcome)
			}
		}
	}
}

// TestCloudBedrockRefusalsAsTheOthers: Bedrock types its errors only in the
// x-amzn-ErrorType header; the mock's ValidationException (its 400 for a request it
// refuses) reaches the client as 400 invalid_request, as other providers' invalid
// requests do, and errors that say nothing of the channel's health (a missing model, a
// model that timed out or failed) as 502 upstream_error; nothing is charged. The errors
// that cool the channel (throttling, access, quota, not ready, 5xx) are classified in
// extproc's tests against the mock's answers (e2e/mock TestBedrockErrors), not here,
// where they would cool demo-bedrock for the tests running beside this one.
func TestCloudBedrockRefusalsAsTheOthers(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	balance := c.balance(t)
	for _, tc := range []struct {
		typ    string
		status int
		code   string
		errTyp string
	}{
		{"ValidationException", 400, "invalid_request", "invalid_request_error"},
		{"ResourceNotFoundException", 502, "upstream_error", "api_error"},
		{"ModelTimeoutException", 502, "upstream_error", "api_error"},
		{"ModelErrorException", 502, "upstream_error", "api_error"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			body := []byte(`{"model":"demo-bedrock","messages":[{"role":"user","content":"hi [[mock:aws_error=` + tc.typ + `]]"}]}`)
			status, h, b := rawRequest(t, "POST", "/chat/completions", c.key, body)
			checkOpenAIError(t, status, h, b, tc.status, tc.code, tc.errTyp, false)
		})
	}
	if got := micros(t, c.waitSettled(t), "balance"); got != balance {
		t.Errorf("balance %d, want %d: a client that saw an error is never charged", got, balance)
	}
}
