// Command anthropic is the README's quick start with the official Anthropic Go SDK: one
// message through the gateway. GATEWAY_KEY is a key from `gatewayctl key create`;
// the gateway's base URL is GATEWAY_BASE_URL, else the one `make run` left in
// .run/base-url (run from the repository root), else http://127.0.0.1:8080/v1 (the SDK
// adds /v1/messages itself, so it is given the address without /v1).
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/llmgw/gateway/internal/runfiles"
)

func main() {
	base, err := runfiles.BaseURL()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	client := anthropic.NewClient(option.WithBaseURL(strings.TrimSuffix(base, "/v1")+"/"), option.WithAPIKey(os.Getenv("GATEWAY_KEY")))
	msg, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:     "demo-claude",
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello from the quick start"))},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%s: %s (%d tokens in, %d out)\n", msg.Model, msg.Content[0].Text, msg.Usage.InputTokens, msg.Usage.OutputTokens)
}
