package e2e_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// rates are a rate card's prices per million tokens, as LOCAL-STACK.md lists them.
type rates struct{ in, read, write, write1h, out int64 }

var (
	cachedBase     = rates{in: 1_000_000, read: 100_000, write: 1_250_000, out: 2_000_000}
	cachedPriority = rates{in: 2_000_000, read: 200_000, write: 1_250_000, out: 4_000_000}
	cachedLong     = rates{in: 2_000_000, read: 200_000, write: 1_250_000, out: 3_000_000}
	claudeBase     = rates{in: 3_000_000, read: 300_000, write: 3_750_000, write1h: 6_000_000, out: 15_000_000}
)

// cost is the sum of the components, each rounded up to a micro-credit.
func (r rates) cost(plain, read, write, write1h, out int64) int64 {
	ceil := func(units, perM int64) int64 { return (units*perM + 999_999) / 1_000_000 }
	return ceil(plain, r.in) + ceil(read, r.read) + ceil(write, r.write) + ceil(write1h, r.write1h) + ceil(out, r.out)
}

// charged checks that the request's one hold was settled at want, not capped.
func chargedExactly(t *testing.T, c customer, before, want int64) {
	t.Helper()
	acc := c.waitSettled(t)
	hold, actual, charged := reservationRow(t, c.keyID)
	if charged != want || actual != want {
		t.Errorf("charged %d (actual %d), want %d", charged, actual, want)
	}
	if charged > hold {
		t.Errorf("charged %d above the hold %d", charged, hold)
	}
	if got := before - micros(t, acc, "balance"); got != want {
		t.Errorf("balance moved by %d, want %d", got, want)
	}
}

// TestRateCardsChargeEachComponent: cache reads, 5-minute and 1-hour writes, a priority
// tier and a long-context band, through each chat API with its official SDK
// (translated routes included), each charged exactly the card's price.
func TestRateCardsChargeEachComponent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	long := strings.Repeat("word ", 1100)
	t.Run("chat cache read and write", func(t *testing.T) {
		t.Parallel()
		c := newCustomer(t, customerOpts{topup: "10"})
		before := c.balance(t)
		oc := openaiClient(c.key)
		r, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "demo-cached",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("one two three four five six [[mock:cache_read=6]] [[mock:cache_write=3]] [[mock:tokens=4]]")},
		})
		if err != nil {
			t.Fatal(err)
		}
		u := r.Usage
		if u.PromptTokensDetails.CachedTokens != 6 || r.ServiceTier != "default" {
			t.Fatalf("usage %+v tier %q", u, r.ServiceTier)
		}
		chargedExactly(t, c, before, cachedBase.cost(u.PromptTokens-6-3, 6, 3, 0, u.CompletionTokens))
	})
	t.Run("chat priority tier", func(t *testing.T) {
		t.Parallel()
		c := newCustomer(t, customerOpts{topup: "10"})
		before := c.balance(t)
		oc := openaiClient(c.key)
		r, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:       "demo-cached",
			ServiceTier: openai.ChatCompletionNewParamsServiceTierPriority,
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("one two three four [[mock:cache_read=2]] [[mock:cache_write=1]] [[mock:tokens=5]]")},
		})
		if err != nil {
			t.Fatal(err)
		}
		u := r.Usage
		if r.ServiceTier != "priority" {
			t.Fatalf("tier %q", r.ServiceTier)
		}
		chargedExactly(t, c, before, cachedPriority.cost(u.PromptTokens-3, 2, 1, 0, u.CompletionTokens))
	})
	t.Run("responses long context", func(t *testing.T) {
		t.Parallel()
		c := newCustomer(t, customerOpts{topup: "10"})
		before := c.balance(t)
		oc := openaiClient(c.key)
		r, err := oc.Responses.New(ctx, responses.ResponseNewParams{
			Model: "demo-cached",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(long + "[[mock:cache_read=100]] [[mock:tokens=3]]")},
		})
		if err != nil {
			t.Fatal(err)
		}
		u := r.Usage
		if u.InputTokens <= 1000 || u.InputTokensDetails.CachedTokens != 100 {
			t.Fatalf("usage %+v", u)
		}
		chargedExactly(t, c, before, cachedLong.cost(u.InputTokens-100, 100, 0, 0, u.OutputTokens))
	})
	t.Run("messages through an OpenAI channel", func(t *testing.T) {
		t.Parallel()
		c := newCustomer(t, customerOpts{topup: "10"})
		before := c.balance(t)
		ac := anthropicClient(c.key)
		m, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
			Model: "demo-cached", MaxTokens: 50,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("one two three four five [[mock:cache_read=4]] [[mock:cache_write=2]] [[mock:tokens=3]]"))},
		})
		if err != nil {
			t.Fatal(err)
		}
		u := m.Usage
		// Anthropic's shape: the cache counts outside input_tokens.
		if u.CacheReadInputTokens != 4 || u.CacheCreationInputTokens != 2 || u.CacheCreation.Ephemeral5mInputTokens != 2 {
			t.Fatalf("usage %+v", u)
		}
		chargedExactly(t, c, before, cachedBase.cost(u.InputTokens, 4, 2, 0, u.OutputTokens))
	})
	for _, tc := range []struct {
		name string
		ttl  anthropic.CacheControlEphemeralTTL
	}{{"messages 5-minute write", ""}, {"messages 1-hour write", anthropic.CacheControlEphemeralTTLTTL1h}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCustomer(t, customerOpts{topup: "10"})
			before := c.balance(t)
			block := anthropic.TextBlockParam{Text: "one two three four five six seven [[mock:cache_read=2]] [[mock:cache_write=3]] [[mock:cache_write_1h=2]] [[mock:tokens=3]]",
				CacheControl: anthropic.NewCacheControlEphemeralParam()}
			block.CacheControl.TTL = tc.ttl
			ac := anthropicClient(c.key)
			m, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
				Model: "demo-claude-cached", MaxTokens: 50,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfText: &block})},
			})
			if err != nil {
				t.Fatal(err)
			}
			u := m.Usage
			var w1h int64
			if tc.ttl != "" {
				w1h = 2
			}
			if u.CacheCreation.Ephemeral5mInputTokens != 3 || u.CacheCreation.Ephemeral1hInputTokens != w1h || u.CacheReadInputTokens != 2 {
				t.Fatalf("usage %+v", u)
			}
			chargedExactly(t, c, before, claudeBase.cost(u.InputTokens, 2, 3, w1h, u.OutputTokens))
		})
	}
	t.Run("chat through an Anthropic channel with a 1-hour write", func(t *testing.T) {
		t.Parallel()
		c := newCustomer(t, customerOpts{topup: "10"})
		before := c.balance(t)
		// The chat client's message carries no cache marker: Anthropic writes nothing.
		oc := openaiClient(c.key)
		r, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "demo-claude-cached",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("one two three [[mock:cache_read=2]] [[mock:cache_write_1h=2]] [[mock:tokens=3]]")},
		})
		if err != nil {
			t.Fatal(err)
		}
		u := r.Usage
		if u.PromptTokensDetails.CachedTokens != 2 {
			t.Fatalf("usage %+v", u)
		}
		chargedExactly(t, c, before, claudeBase.cost(u.PromptTokens-2, 2, 0, 0, u.CompletionTokens))
	})
}

// TestUnpricedTierRefused: a service_tier or inference_geo the card does not price is
// refused with 400 invalid_request naming the param, in the client's API, nothing held.
func TestUnpricedTierRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCustomer(t, customerOpts{topup: "10"})
	before := c.balance(t)
	oc := openaiClient(c.key)
	_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "demo-cached", ServiceTier: openai.ChatCompletionNewParamsServiceTierScale,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusBadRequest || oe.Code != "invalid_request" || oe.Param != "service_tier" {
		t.Fatalf("err = %v", err)
	}
	_, err = oc.Responses.New(ctx, responses.ResponseNewParams{
		Model: "demo-chat", ServiceTier: responses.ResponseNewParamsServiceTierPriority,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusBadRequest || oe.Param != "service_tier" {
		t.Fatalf("responses err = %v", err)
	}
	status, h, body := rawRequest(t, http.MethodPost, "/messages", c.key,
		[]byte(`{"model":"demo-claude-cached","max_tokens":16,"inference_geo":"eu","messages":[{"role":"user","content":"hi"}]}`),
		"anthropic-version", "2023-06-01")
	checkAnthropicError(t, status, h, body, 400, "invalid_request_error", "invalid_request")
	if !strings.Contains(string(body), "inference_geo") {
		t.Errorf("body does not name inference_geo: %s", body)
	}
	acc := c.waitSettled(t)
	if got := micros(t, acc, "balance"); got != before {
		t.Errorf("balance %d, want %d", got, before)
	}
	if n := reservationCount(t, c.keyID); n != 0 {
		t.Errorf("%d reservations, want none", n)
	}
}

// TestHoldBoundsCacheWritesUnderLoad: requests that write their whole prompt to the
// 1-hour cache (the dearest input part), sent at once, are each charged what the card
// says and never above their hold (nothing is capped).
func TestHoldBoundsCacheWritesUnderLoad(t *testing.T) {
	t.Parallel()
	const n = 24
	prompt := strings.Repeat("cache me ", 400) + "[[mock:cache_write_1h=100000]] [[mock:tokens=8]]"
	errs := make(chan error, n)
	customers := make([]customer, n)
	for i := range customers {
		customers[i] = newCustomer(t, customerOpts{topup: "10"})
	}
	for i := range n {
		go func(c customer) {
			ac := anthropicClient(c.key)
			block := anthropic.TextBlockParam{Text: prompt, CacheControl: anthropic.NewCacheControlEphemeralParam()}
			block.CacheControl.TTL = anthropic.CacheControlEphemeralTTLTTL1h
			_, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{
				Model: "demo-claude-cached", MaxTokens: 16,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfText: &block})},
			})
			errs <- err
		}(customers[i])
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range customers {
		c.waitSettled(t)
		hold, actual, charged := reservationRow(t, c.keyID)
		if actual > hold || charged != actual || charged == 0 {
			t.Errorf("hold %d, actual %d, charged %d: the hold does not bound a 1-hour write", hold, actual, charged)
		}
	}
}
