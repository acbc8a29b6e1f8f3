package front

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/llmgw/gateway/e2e/internal/serve"
	"github.com/llmgw/gateway/envoy/config"
	"github.com/llmgw/gateway/internal/logging"
	"github.com/llmgw/gateway/internal/pprof"
)

// EnvPprof turns on Go's runtime profiles on the admin address (as --pprof does).
const EnvPprof = "FRONT_PPROF"

// Main runs the front: `envoyfront --config envoy/envoy.yaml`. It serves until ctx is
// done and returns the process exit code.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("envoyfront", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "envoy/envoy.yaml", "Envoy bootstrap file to emulate")
	on, err := pprof.Enabled(os.Getenv(EnvPprof))
	if err != nil {
		fmt.Fprintf(stderr, "envoyfront: %s: %v\n", EnvPprof, err)
		return 2
	}
	profiles := fs.Bool("pprof", on, "serve Go's runtime profiles under /debug/pprof/ on the bootstrap's admin address (env "+EnvPprof+")")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := logging.Std(stderr, "envoyfront")
	srv, ln, err := Start(*path, logger, *profiles)
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
// With profiles, Go's runtime profiles are served on the bootstrap's admin address
// until the server shuts down.
func Start(path string, logger *log.Logger, profiles bool) (*http.Server, net.Listener, error) {
	bs, err := config.Load(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := FromBootstrap(bs)
	if err != nil {
		return nil, nil, err
	}
	var admin *http.Server
	if profiles {
		if admin, err = startProfiles(cfg.Admin, logger); err != nil {
			return nil, nil, err
		}
	}
	f, err := New(cfg, logger)
	if err != nil {
		closeServer(admin)
		return nil, nil, err
	}
	f.WaitClusters()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		closeServer(admin)
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
	srv.RegisterOnShutdown(func() { _ = f.Close(); closeServer(admin) })
	return srv, ln, nil
}

// startProfiles serves Go's runtime profiles under /debug/pprof/ on addr (nothing
// else: Envoy's own admin endpoints are not emulated). They show the process's memory
// and call stacks, so they are off unless asked for.
func startProfiles(addr string, logger *log.Logger) (*http.Server, error) {
	if addr == "" {
		return nil, errors.New("--pprof needs the bootstrap's admin address")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	logger.Printf("serving runtime profiles on %s%s", ln.Addr(), pprof.Prefix)
	return serveProfiles(ln, logger), nil
}

func serveProfiles(ln net.Listener, logger *log.Logger) *http.Server {
	srv := &http.Server{
		Handler:           pprof.Wrap(http.NotFoundHandler(), true),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          logger,
	}
	go func() { _ = srv.Serve(ln) }()
	return srv
}

func closeServer(s *http.Server) {
	if s != nil {
		_ = s.Close()
	}
}
