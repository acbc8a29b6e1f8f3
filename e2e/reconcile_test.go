package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
)

// Usage by channel and the reconciliation name the channel that served each charge and
// its upstream model: a failover request is the channel that answered, not the first
// one tried. The ledger's charges carry their channel, components and tier fields.
func TestUsageByChannelAndReconcile(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	ctx := context.Background()
	oc, ac := openaiClient(c.key), anthropicClient(c.key)
	chat, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "demo-failover",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("reconcile me [[mock:tokens=3]]")},
	})
	if err != nil {
		t.Fatal(err)
	}
	chatCost := tokenCost(chat.Usage.PromptTokens, chat.Usage.CompletionTokens, 1_000_000, 2_000_000)
	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     "demo-claude",
		MaxTokens: 100,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("reconcile me too [[mock:tokens=4]]"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	claudeCost := tokenCost(msg.Usage.InputTokens, msg.Usage.OutputTokens, 3_000_000, 15_000_000)
	c.waitSettled(t)

	rows := ctl(t, "usage", "--account", c.account, "--by", "channel")["rows"].([]any)
	got := map[string]string{}
	for _, r := range rows {
		m := r.(map[string]any)
		got[fmt.Sprint(m["channel"])] = fmt.Sprint(m["upstream_model"], " ", m["requests"], " ", micros(t, m, "charged"))
	}
	want := map[string]string{
		"failover-4-openai": fmt.Sprint("mock-gpt 1 ", chatCost),
		"mock-demo-claude":  fmt.Sprint("mock-claude 1 ", claudeCost),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("usage by channel = %v, want %v", got, want)
	}

	for _, e := range ctl(t, "ledger", "--account", c.account)["entries"].([]any) {
		m := e.(map[string]any)
		if _, ok := m["components"].([]any); !ok || m["kind"] == "charge" && m["channel"] == "" {
			t.Errorf("entry %v lacks its channel or components", m)
		}
	}

	// Every account's charges of the day, so at least ours.
	today := time.Now().UTC().Format(time.DateOnly)
	rec := ctl(t, "reconcile", "--from", today, "--to", today)["rows"].([]any)
	for channel, upstream := range map[string]string{"failover-4-openai": "mock-gpt", "mock-demo-claude": "mock-claude"} {
		found := false
		for _, r := range rec {
			m := r.(map[string]any)
			if m["day"] == today && m["channel"] == channel && m["upstream_model"] == upstream && micros(t, m, "charged") > 0 {
				found = true
			}
		}
		if !found {
			t.Errorf("reconcile of %s lacks %s/%s: %v", today, channel, upstream, rec)
		}
	}
}
