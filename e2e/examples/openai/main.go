// Command openai is the README's quick start with the official OpenAI Go SDK: one chat
// completion through the gateway. GATEWAY_KEY is a key from `gatewayctl key create`;
// the gateway's base URL is GATEWAY_BASE_URL, else the one `make run` left in
// .run/base-url (run from the repository root), else http://127.0.0.1:8080/v1.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/gateway/internal/runfiles"
)

func main() {
	base, err := runfiles.BaseURL()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	client := openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey(os.Getenv("GATEWAY_KEY")))
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "demo-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello from the quick start")},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%s: %s (%d tokens in, %d out)\n", resp.Model, resp.Choices[0].Message.Content,
		resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
}
