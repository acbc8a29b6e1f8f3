package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
)

var probeSeq atomic.Int64

// TestFailoverAcrossChannels: demo-failover (docs/local-stack.md: an out-of-funds OpenAI
// account, a port where nothing listens, an out-of-funds Anthropic account, a working
// OpenAI account) always answers, streamed or not, through every chat API, and each
// request is charged exactly once, the model's price of the usage it was told; the
// channels that failed are skipped by the next request (the mock counts the attempts
// that reached it); 50 concurrent failovers on one account settle exactly.
func TestFailoverAcrossChannels(t *testing.T) {
	// An enterprise account: 50 requests in flight at once stay within its limits.
	c := newCustomer(t, customerOpts{tier: "enterprise", topup: "10"})
	balance := c.balance(t)
	requests := 0
	for _, api := range chatAPIs {
		for _, stream := range []bool{false, true} {
			a := api.do(t, c.key, call{model: "demo-failover", prompt: "fail over please [[mock:tokens=4]]", stream: stream})
			requests++
			if a.text == "" || a.out != 4 || a.in <= 0 || a.finish != finishStop {
				t.Errorf("%s stream=%v: %+v", api.name, stream, a)
			}
			now := micros(t, c.waitSettled(t), "balance")
			if got, want := balance-now, tokenCost(a.in, a.out, 1_000_000, 2_000_000); got != want || want == 0 {
				t.Errorf("%s stream=%v: charged %d micros, want %d", api.name, stream, got, want)
			}
			balance = now
		}
	}

	// Two requests in a row: the second finds the failed channels cooling, so only the
	// working one is attempted (the unreachable channel never reaches the mock at all).
	first, second := fmt.Sprintf("fo-%d", probeSeq.Add(1)), fmt.Sprintf("fo-%d", probeSeq.Add(1))
	chatDo(t, c.key, call{model: "demo-failover", prompt: "first [[mock:probe=" + first + "]]"})
	chatDo(t, c.key, call{model: "demo-failover", prompt: "second [[mock:probe=" + second + "]]"})
	requests += 2
	if p, ok := findMockProbe(t, first); !ok || p.Attempts < 1 {
		t.Errorf("first request's attempts at the mock: %+v", p)
	}
	if p, _ := findMockProbe(t, second); p.Attempts != 1 {
		t.Errorf("second request reached the mock %d times, want 1: a cooling channel was attempted", p.Attempts)
	}
	balance = micros(t, c.waitSettled(t), "balance")

	// A stream that breaks after its first bytes is not failed over: it ends in the
	// client's framing, and what it delivered is charged.
	cut := fmt.Sprintf("fo-%d", probeSeq.Add(1))
	streamer := openaiClient(c.key)
	s := streamer.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "demo-failover",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("cut me [[mock:cut]] [[mock:tokens=10]] [[mock:probe=" + cut + "]]")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	text := ""
	for s.Next() {
		if len(s.Current().Choices) > 0 {
			text += s.Current().Choices[0].Delta.Content
		}
	}
	requests++
	if text == "" || s.Err() == nil {
		t.Errorf("cut stream: text %q, error %v; want some text, then an error", text, s.Err())
	}
	if p, _ := findMockProbe(t, cut); p.Attempts != 1 {
		t.Errorf("a stream cut after its first byte was attempted %d times, want 1", p.Attempts)
	}
	now := micros(t, c.waitSettled(t), "balance")
	if now >= balance {
		t.Errorf("the delivered part of a cut stream was not charged (balance %d then %d)", balance, now)
	}
	balance = now

	// 50 at once on one account: every one answers, the account is charged the sum.
	const n = 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	var want int64
	var failed atomic.Int32
	client := openaiClient(c.key)
	for i := range n {
		wg.Go(func() {
			r, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:    "demo-failover",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("concurrent %d [[mock:tokens=3]]", i))},
			})
			if err != nil {
				failed.Add(1)
				t.Errorf("concurrent request %d: %v", i, err)
				return
			}
			mu.Lock()
			want += tokenCost(r.Usage.PromptTokens, r.Usage.CompletionTokens, 1_000_000, 2_000_000)
			mu.Unlock()
		})
	}
	wg.Wait()
	requests += n
	now = micros(t, c.waitSettled(t), "balance")
	if got := balance - now; got != want {
		t.Errorf("50 concurrent failovers charged %d micros, want %d", got, want)
	}

	// One charge per request, never one per attempt.
	led := ctl(t, "ledger", "--account", c.account, "--limit", "500")
	entries, _ := led["entries"].([]any)
	charges := 0
	for _, e := range entries {
		if m, _ := e.(map[string]any); m["kind"] == "charge" {
			charges++
		}
	}
	if charges != requests {
		t.Errorf("%d charges for %d requests", charges, requests)
	}
}
