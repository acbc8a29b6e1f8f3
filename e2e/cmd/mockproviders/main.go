// Command mockproviders serves the mock OpenAI, Anthropic and video providers of the
// local stack and the e2e suite.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/llmgw/gateway/e2e/mock"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := mock.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
