package front

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/llmgw/gateway/e2e/internal/serve"
	"github.com/llmgw/gateway/envoy/config"
	"github.com/llmgw/gateway/internal/logging"
)

// Main runs the front: `envoyfront --config envoy/envoy.yaml`. It serves until ctx is
// done and returns the process exit code.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("envoyfront", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "envoy/envoy.yaml", "Envoy bootstrap file to emulate")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := logging.Std(stderr, "envoyfront")
	srv, ln, err := Start(*path, logger)
	if err != nil {
		fmt.Fprintln(stderr, "envoyfront:", err)
		return 1
	}
	logger.Printf("listening on %s (Envoy test front for %s)", ln.Addr(), *path)
	if err := serve.Until(ctx, srv, ln); err != nil {
		fmt.Fprintln(stderr, "envoyfront:", err)
		return 1
	}
	return 0
}

// Start loads the Envoy bootstrap at path, checks that the front emulates every
// setting in it, and returns an HTTP server (HTTP/1.1 and h2c) with its listener.
func Start(path string, logger *log.Logger) (*http.Server, net.Listener, error) {
	bs, err := config.Load(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := FromBootstrap(bs)
	if err != nil {
		return nil, nil, err
	}
	f, err := New(cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	f.WaitClusters()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	ln = f.Listen(ln)
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           f,
		Protocols:         protocols,
		HTTP2:             cfg.ServerHTTP2(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          logger,
	}
	srv.RegisterOnShutdown(func() { _ = f.Close() })
	return srv, ln, nil
}
