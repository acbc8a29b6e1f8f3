package e2e_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// TestMessagesStreamStartIsUnfinished: a /v1/messages stream translated from an OpenAI
// chat channel opens, as Anthropic's own does, with message_start's stop_reason and
// stop_sequence null — a string there tells an SDK the message already ended — and ends
// with the stop reason in message_delta.
func TestMessagesStreamStartIsUnfinished(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	client := anthropicClient(c.key)
	s := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model:     "demo-chat",
		MaxTokens: 100,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("alpha beta [[mock:tokens=3]]"))},
	})
	var start, stop string
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "message_start":
			start = ev.RawJSON()
		case "message_delta":
			stop = string(ev.Delta.StopReason)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("messages stream: %v", err)
	}
	var msg struct {
		Message map[string]json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal([]byte(start), &msg); err != nil {
		t.Fatalf("message_start %q: %v", start, err)
	}
	for _, f := range []string{"stop_reason", "stop_sequence"} {
		if v, ok := msg.Message[f]; !ok || string(v) != "null" {
			t.Errorf("message_start %s = %s, want null: %s", f, v, start)
		}
	}
	if stop != "end_turn" {
		t.Errorf("message_delta stop_reason %q, want end_turn", stop)
	}
}
