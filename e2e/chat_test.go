package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// tokenCost is the catalog's rule: each priced component (input tokens, output tokens)
// is units × price per million, rounded up to the micro.
func tokenCost(in, out, inPerM, outPerM int64) int64 {
	ceil := func(units, perM int64) int64 { return (units*perM + 999_999) / 1_000_000 }
	return ceil(in, inPerM) + ceil(out, outPerM)
}

func openaiClient(key string, opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{
		option.WithBaseURL(gw.BaseURL + "/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: newAPITransport(nil, gw.BaseURL)}),
	}
	return openai.NewClient(append(base, opts...)...)
}

func anthropicClient(key string, opts ...anthropicoption.RequestOption) anthropic.Client {
	base := []anthropicoption.RequestOption{
		anthropicoption.WithBaseURL(strings.TrimSuffix(gw.BaseURL, "/v1") + "/"),
		anthropicoption.WithAPIKey(key),
		anthropicoption.WithMaxRetries(0),
		anthropicoption.WithHTTPClient(&http.Client{Transport: newAPITransport(nil, gw.BaseURL)}),
	}
	return anthropic.NewClient(append(base, opts...)...)
}

func TestChatCompletion(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	before := c.balance(t)
	client := openaiClient(c.key)
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:     "demo-chat",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there [[mock:tokens=7]]")},
		MaxTokens: openai.Int(64),
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "demo-chat" {
		t.Errorf("model = %q, want the public id demo-chat", resp.Model)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" {
		t.Fatalf("choices = %+v", resp.Choices)
	}
	if resp.Usage.CompletionTokens != 7 || resp.Usage.PromptTokens <= 0 {
		t.Errorf("usage = %+v", resp.Usage)
	}
	acc := c.waitSettled(t)
	want := tokenCost(resp.Usage.PromptTokens, resp.Usage.CompletionTokens, 1_000_000, 2_000_000)
	if got := before - micros(t, acc, "balance"); got != want {
		t.Errorf("charged %d micros, want %d (catalog price of %+v)", got, want, resp.Usage)
	}
	key := ctl(t, "key", "show", c.keyID)
	if got := micros(t, key, "spent_today"); got != want {
		t.Errorf("key spent today %d, want %d", got, want)
	}
}

func TestChatCompletionStream(t *testing.T) {
	t.Parallel()
	for _, withUsage := range []bool{true, false} {
		name := map[bool]string{true: "include_usage", false: "no_usage"}[withUsage]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCustomer(t, customerOpts{topup: "10"})
			before := c.balance(t)
			client := openaiClient(c.key)
			params := openai.ChatCompletionNewParams{
				Model:    "demo-chat",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream please [[mock:tokens=5]]")},
			}
			if withUsage {
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			stream := client.Chat.Completions.NewStreaming(context.Background(), params)
			var acc openai.ChatCompletionAccumulator
			chunks, usageChunks := 0, 0
			for stream.Next() {
				chunk := stream.Current()
				chunks++
				if chunk.Model != "demo-chat" {
					t.Errorf("chunk model = %q, want demo-chat", chunk.Model)
				}
				if chunk.JSON.Usage.Valid() && chunk.Usage.TotalTokens > 0 {
					usageChunks++
				}
				acc.AddChunk(chunk)
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if acc.Choices[0].Message.Content == "" {
				t.Error("no text accumulated")
			}
			if withUsage && (usageChunks != 1 || acc.Usage.CompletionTokens != 5) {
				t.Errorf("usage chunks %d, usage %+v; want one chunk with 5 completion tokens", usageChunks, acc.Usage)
			}
			if !withUsage && usageChunks != 0 {
				t.Errorf("client did not ask for usage but got %d usage chunks", usageChunks)
			}
			settled := c.waitSettled(t)
			charged := before - micros(t, settled, "balance")
			if charged <= 0 {
				t.Errorf("charged %d, want > 0", charged)
			}
			if withUsage {
				want := tokenCost(acc.Usage.PromptTokens, acc.Usage.CompletionTokens, 1_000_000, 2_000_000)
				if charged != want {
					t.Errorf("charged %d, want %d", charged, want)
				}
			}
		})
	}
}

func TestMessages(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	client := anthropicClient(c.key)
	before := c.balance(t)
	msg, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:     "demo-claude",
		MaxTokens: 100,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi claude [[mock:tokens=4]]"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Model) != "demo-claude" || len(msg.Content) == 0 || msg.Usage.OutputTokens != 4 {
		t.Fatalf("message = model %q, content %d blocks, usage %+v", msg.Model, len(msg.Content), msg.Usage)
	}
	settled := c.waitSettled(t)
	want := tokenCost(msg.Usage.InputTokens, msg.Usage.OutputTokens, 3_000_000, 15_000_000)
	if got := before - micros(t, settled, "balance"); got != want {
		t.Errorf("charged %d, want %d", got, want)
	}

	before = micros(t, settled, "balance")
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model:     "demo-claude",
		MaxTokens: 100,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("stream [[mock:tokens=6]]"))},
	})
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if string(acc.Model) != "demo-claude" || acc.Usage.OutputTokens != 6 || len(acc.Content) == 0 || acc.Content[0].Text == "" {
		t.Fatalf("accumulated = model %q, usage %+v, content %+v", acc.Model, acc.Usage, acc.Content)
	}
	settled = c.waitSettled(t)
	want = tokenCost(acc.Usage.InputTokens, acc.Usage.OutputTokens, 3_000_000, 15_000_000)
	if got := before - micros(t, settled, "balance"); got != want {
		t.Errorf("stream charged %d, want %d", got, want)
	}
}

func TestCountTokens(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "1"})
	client := anthropicClient(c.key)
	before := c.balance(t)
	res, err := client.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
		Model:    "demo-claude",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count these words please"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.InputTokens <= 0 {
		t.Errorf("input_tokens = %d", res.InputTokens)
	}
	if got := c.balance(t); got != before {
		t.Errorf("count_tokens charged %d micros", before-got)
	}
}

func TestModels(t *testing.T) {
	t.Parallel()
	// Without a key (raw HTTP: the SDK always sends one) the public catalog.
	status, _, body := rawRequest(t, http.MethodGet, "/models", "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /models without a key: %d %s", status, body)
	}
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil || list.Object != "list" {
		t.Fatalf("public catalog %s: %v", body, err)
	}
	ids := map[string]bool{}
	for _, m := range list.Data {
		ids[m.ID] = true
	}
	for _, id := range []string{"demo-free", "demo-chat", "demo-claude", "demo-premium"} {
		if !ids[id] {
			t.Errorf("public catalog lacks %s: %v", id, ids)
		}
	}

	// A key on an account without a top-up sees only what it can call now: free models.
	c := newCustomer(t, customerOpts{})
	keyed := openaiClient(c.key)
	page, err := keyed.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, m := range page.Data {
		got[m.ID] = true
	}
	if !got["demo-free"] || got["demo-chat"] || got["demo-unpriced"] || got["demo-restricted"] {
		t.Errorf("eligible models for a key without top-up = %v", got)
	}

	bad := openaiClient("gw-not-a-real-key")
	_, err = bad.Models.List(context.Background())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" {
		t.Errorf("invalid key: %v", err)
	}
}

// countingTransport counts the attempts an SDK makes.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestSDKRetriesFollowShouldRetry(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	for _, tc := range []struct {
		name     string
		model    string
		wantCode string
		attempts int32
	}{
		// upstream_account_unavailable is retryable: the SDK retries (twice here).
		{"retryable", "demo-exhausted", "upstream_account_unavailable", 3},
		// upstream_error is not: one attempt, whatever the status.
		{"not retryable", "demo-broken", "upstream_error", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct := &countingTransport{}
			client := openaiClient(c.key, option.WithMaxRetries(2), option.WithHTTPClient(&http.Client{Transport: ct}))
			_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:    tc.model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.Code != tc.wantCode {
				t.Fatalf("err = %v, want %s", err, tc.wantCode)
			}
			if got := ct.n.Load(); got != tc.attempts {
				t.Errorf("attempts = %d, want %d", got, tc.attempts)
			}
		})
	}
	if acc := c.waitSettled(t); micros(t, acc, "balance") != 10_000_000 {
		t.Errorf("failed upstream calls charged something: %v", acc)
	}
}
