package e2e_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// TestOpenAIAgentLoopToolRoundTrip: an agent loop on the official OpenAI SDK sends the
// assistant's answer back as message.ToParam() — tool_calls and no content at all — and
// then a tool message per call. Every chat model serves that round trip, whatever its
// channel's format (demo-claude's is Anthropic Messages: the assistant turn becomes
// tool_use blocks and the tool message a tool_result), streamed and not, and each call
// is charged the model's price of the usage the client was told.
func TestOpenAIAgentLoopToolRoundTrip(t *testing.T) {
	t.Parallel()
	for _, m := range chatModels {
		for _, stream := range []bool{false, true} {
			name := m.id + map[bool]string{false: "/json", true: "/stream"}[stream]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				c := newCustomer(t, customerOpts{topup: "10"})
				balance := c.balance(t)
				charged := func(what string, cc openai.ChatCompletion) {
					t.Helper()
					now := micros(t, c.waitSettled(t), "balance")
					want := tokenCost(cc.Usage.PromptTokens, cc.Usage.CompletionTokens, m.inPerM, m.outPerM)
					if got := balance - now; got != want || want == 0 {
						t.Errorf("%s: charged %d micros, want %d (usage %+v)", what, got, want, cc.Usage)
					}
					balance = now
				}
				p := openai.ChatCompletionNewParams{
					Model:    openai.ChatModel(m.id),
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("please find red green blue [[mock:tool=lookup]]")},
					Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
						Name: "lookup", Parameters: shared.FunctionParameters(lookupSchema()),
					})},
				}
				if stream {
					p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				}

				first := agentTurn(t, c.key, p, stream)
				msg := first.Choices[0].Message
				if first.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "lookup" {
					t.Fatalf("first turn: finish %q, tool calls %+v", first.Choices[0].FinishReason, msg.ToolCalls)
				}
				charged("tool call", first)

				// Exactly what an agent loop sends back.
				back := msg.ToParam()
				raw, err := json.Marshal(back)
				if err != nil {
					t.Fatal(err)
				}
				var sent map[string]any
				if err := json.Unmarshal(raw, &sent); err != nil {
					t.Fatal(err)
				}
				if _, has := sent["content"]; has || sent["tool_calls"] == nil {
					t.Fatalf("the SDK's assistant turn is not the shape under test: %s", raw)
				}
				p.Messages = append(p.Messages, back)
				for _, tc := range msg.ToolCalls {
					p.Messages = append(p.Messages, openai.ToolMessage("found it", tc.ID))
				}

				second := agentTurn(t, c.key, p, stream)
				if second.Choices[0].FinishReason != "stop" || second.Choices[0].Message.Content == "" {
					t.Errorf("tool result turn: finish %q, content %q", second.Choices[0].FinishReason, second.Choices[0].Message.Content)
				}
				charged("tool result", second)
			})
		}
	}
}

// agentTurn makes one chat call through the official SDK, streamed (accumulated) or not.
func agentTurn(t *testing.T, key string, p openai.ChatCompletionNewParams, stream bool) openai.ChatCompletion {
	t.Helper()
	client := openaiClient(key)
	if !stream {
		r, err := client.Chat.Completions.New(context.Background(), p)
		if err != nil {
			t.Fatalf("chat %s: %v", p.Model, err)
		}
		return *r
	}
	s := client.Chat.Completions.NewStreaming(context.Background(), p)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("chat stream %s: %v", p.Model, err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("chat stream %s: %d choices", p.Model, len(acc.Choices))
	}
	return acc.ChatCompletion
}
