// Command envoyfront is the Envoy test front: it serves envoy/envoy.yaml's listener the
// way Envoy would, for the e2e suite and the local stack when no Envoy binary exists.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/llmgw/gateway/e2e/front"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := front.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
