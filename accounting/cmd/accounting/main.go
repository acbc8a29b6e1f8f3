// Command accounting is the ledger's gRPC service; see accounting/app.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/llmgw/gateway/accounting/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
