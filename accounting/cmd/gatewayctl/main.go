// Command gatewayctl is the console's operations on accounts and keys; see
// accounting/ctl.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/llmgw/gateway/accounting/ctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctl.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
