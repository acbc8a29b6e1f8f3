// Command extproc is the gateway's Envoy ext_proc server. See extproc/app.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/llmgw/gateway/extproc/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
