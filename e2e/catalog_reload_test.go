package e2e_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/llmgw/gateway/e2e/mock"
)

// TestCatalogReloadsWhileServing: while the stack serves traffic, a catalog edit adds a
// model with a channel on a new upstream listener (listed and answering within 5 s: the
// catalog reload and the cluster's delivery to the front over xDS), a price change applies to the next request
// and not to one already streaming, and an invalid catalog is refused while traffic goes
// on; no request fails meanwhile.
func TestCatalogReloadsWhileServing(t *testing.T) {
	original, err := os.ReadFile(gw.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(gw.Catalog, original, 0o600) })
	write := func(doc string) {
		t.Helper()
		// Written whole to a temporary file and renamed, as a ConfigMap update swaps it.
		tmp := gw.Catalog + ".tmp"
		if err := os.WriteFile(tmp, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, gw.Catalog); err != nil {
			t.Fatal(err)
		}
	}
	// The new model's channel is on a new upstream: a mock provider listener started
	// now, in a cluster the catalog adds (served to the front over xDS, no restart).
	live := httptest.NewServer(mock.New())
	defer live.Close()
	withLive := func(inPerM, outPerM string) string {
		doc := strings.Replace(string(original), "models:\n", "models:\n  - id: demo-live\n    kind: chat\n    prices: {input_per_mtok: "+inPerM+", output_per_mtok: "+outPerM+"}\n    max_output_tokens: 4096\n    created: 1767225600\n", 1)
		doc = strings.Replace(doc, "clusters:\n", "clusters:\n  - {name: mock-live, address: \""+live.Listener.Addr().String()+"\", connect_timeout: 1s}\n", 1)
		return strings.Replace(doc, "channels:\n", "channels:\n  - {name: mock-demo-live, model: demo-live, cluster: mock-live, format: anthropic, upstream_model: mock-claude, credential_env: DEMO_ANTHROPIC_KEY}\n", 1)
	}

	c := newCustomer(t, customerOpts{topup: "10"})
	client := openaiClient(c.key)
	// Background traffic on an existing model: none of it may fail during the changes.
	var failures, calls atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			calls.Add(1)
			if _, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "demo-chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("steady traffic")},
			}); err != nil {
				failures.Add(1)
				t.Logf("background request failed: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	// 1. A new model (on an Anthropic channel, called through the OpenAI API).
	write(withLive("1000000", "2000000"))
	ask := func(prompt string) *openai.ChatCompletion {
		r, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "demo-live", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		})
		if err != nil {
			return nil
		}
		return r
	}
	deadline := time.Now().Add(5 * time.Second)
	var first *openai.ChatCompletion
	for first == nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		first = ask("hello live [[mock:tokens=3]]")
	}
	if first == nil {
		t.Fatal("the new model did not answer within 5 s of the edit")
	}
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, m := range page.Data {
		listed = listed || m.ID == "demo-live"
	}
	if !listed {
		t.Error("GET /v1/models does not list the new model")
	}

	// 2. A price change: a stream admitted under the old price settles at it.
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "demo-live",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("slow live [[mock:tokens=3]] [[mock:slow=3]]")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	if !stream.Next() { // admitted: its first chunk arrived
		t.Fatalf("stream: %v", stream.Err())
	}
	write(withLive("5000000", "7000000"))
	var acc openai.ChatCompletionAccumulator
	acc.AddChunk(stream.Current())
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	c.waitSettled(t)
	// The background traffic spends on demo-chat too: the ledger entries tell the charges apart.
	if got, want := chargeOf(t, c, "demo-live", acc.Usage.PromptTokens, acc.Usage.CompletionTokens), tokenCost(acc.Usage.PromptTokens, acc.Usage.CompletionTokens, 1_000_000, 2_000_000); got != want {
		t.Errorf("stream admitted under the old price charged %d, want %d", got, want)
	}
	var next *openai.ChatCompletion
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		next = ask("priced anew [[mock:tokens=5]]")
		if next != nil && chargeOf(t, c, "demo-live", next.Usage.PromptTokens, next.Usage.CompletionTokens) == tokenCost(next.Usage.PromptTokens, next.Usage.CompletionTokens, 5_000_000, 7_000_000) {
			break
		}
		next = nil
		time.Sleep(200 * time.Millisecond)
	}
	if next == nil {
		t.Error("the new price did not apply to new requests within 5 s")
	}

	// 3. An invalid catalog is refused: the model keeps answering at its last price.
	write(strings.Replace(withLive("5000000", "7000000"), "channels:\n", "channels:\n  - {name: broken, model: ghost, cluster: c, format: openai, upstream_model: x}\n", 1))
	time.Sleep(3 * time.Second) // longer than the reload poll
	if r := ask("still here [[mock:tokens=2]]"); r == nil {
		t.Error("the last good catalog stopped serving after an invalid edit")
	}
	close(stop)
	wg.Wait()
	if failures.Load() > 0 {
		t.Errorf("%d of %d background requests failed during the changes", failures.Load(), calls.Load())
	}
}

// chargeOf finds the newest ledger charge of model with exactly this usage and returns
// its amount in micros (0 when none has settled yet).
func chargeOf(t *testing.T, c customer, model string, in, out int64) int64 {
	t.Helper()
	led := ctl(t, "ledger", "--account", c.account, "--limit", "50")
	entries, _ := led["entries"].([]any)
	for _, e := range entries {
		m, _ := e.(map[string]any)
		if m["model"] != model || fmt.Sprint(m["input_tokens"]) != fmt.Sprint(in) || fmt.Sprint(m["output_tokens"]) != fmt.Sprint(out) {
			continue
		}
		return -micros(t, m, "amount")
	}
	return 0
}
