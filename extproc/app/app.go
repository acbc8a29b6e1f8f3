// Package app is the extproc binary as a library: Main parses flags and environment,
// loads the catalog and the tokenizer, dials accounting, serves the ext_proc gRPC API
// and the health/metrics HTTP endpoints, and stops gracefully when ctx ends. The main
// package only wires signals to ctx and calls Main, so the whole binary is testable.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/envoy"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/tokens"
	"github.com/llmgw/gateway/extproc/webhook"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
)

// Config is the binary's configuration, with defaults from Defaults.
type Config struct {
	ListenAddr       string
	AccountingAddr   string
	ServiceToken     string
	ServiceTokenFile string
	CatalogPath      string
	MetricsAddr      string
	// PublicHosts are the service's own hostnames, refused as video webhook
	// destinations (GATEWAY_PUBLIC_HOSTS, comma-separated).
	PublicHosts []string
	// StopTimeout bounds the graceful stop of in-flight streams.
	StopTimeout time.Duration
}

// Defaults returns the configuration from the environment (EXTPROC_ADDR,
// ACCOUNTING_ADDR, GATEWAY_SERVICE_TOKEN, GATEWAY_CATALOG, EXTPROC_METRICS_ADDR,
// GATEWAY_PUBLIC_HOSTS) with the local stack's defaults.
func Defaults(getenv func(string) string) Config {
	or := func(k, d string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return d
	}
	return Config{
		ListenAddr:     or("EXTPROC_ADDR", "127.0.0.1:50051"),
		AccountingAddr: or("ACCOUNTING_ADDR", "127.0.0.1:50052"),
		ServiceToken:   getenv("GATEWAY_SERVICE_TOKEN"),
		CatalogPath:    or("GATEWAY_CATALOG", "deploy/local/catalog.yaml"),
		MetricsAddr:    or("EXTPROC_METRICS_ADDR", "127.0.0.1:9101"),
		PublicHosts:    webhook.ParseOwnHosts(getenv("GATEWAY_PUBLIC_HOSTS")),
		StopTimeout:    15 * time.Second,
	}
}

// Main runs extproc until ctx ends and returns the process exit code: 0 after a
// graceful stop, 2 for bad flags or configuration, 1 when serving failed.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	cfg := Defaults(os.Getenv)
	fs := flag.NewFlagSet("extproc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.ListenAddr, "listen", cfg.ListenAddr, "ext_proc gRPC listen address (env EXTPROC_ADDR)")
	fs.StringVar(&cfg.AccountingAddr, "accounting-addr", cfg.AccountingAddr, "accounting gRPC address (env ACCOUNTING_ADDR)")
	fs.StringVar(&cfg.ServiceTokenFile, "service-token-file", "", "file holding the accounting service token (else env GATEWAY_SERVICE_TOKEN)")
	fs.StringVar(&cfg.CatalogPath, "catalog", cfg.CatalogPath, "model catalog YAML (env GATEWAY_CATALOG)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", cfg.MetricsAddr, "health and metrics HTTP address (env EXTPROC_METRICS_ADDR)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := newLogger(stderr)
	defer func() { _ = log.Sync() }()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("extproc stopped", zap.Error(err))
		var ce configError
		if errors.As(err, &ce) {
			return 2
		}
		return 1
	}
	return 0
}

type configError struct{ error }

func newLogger(w io.Writer) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), zap.InfoLevel))
}

func run(ctx context.Context, cfg Config, log *zap.Logger) error {
	token := cfg.ServiceToken
	if cfg.ServiceTokenFile != "" {
		b, err := os.ReadFile(cfg.ServiceTokenFile)
		if err != nil {
			return configError{fmt.Errorf("service token: %w", err)}
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return configError{errors.New("no accounting service token: set GATEWAY_SERVICE_TOKEN or --service-token-file")}
	}
	cat, err := catalog.Load(cfg.CatalogPath)
	if err != nil {
		return configError{err}
	}
	counter, err := tokens.New()
	if err != nil {
		return err
	}
	conn, err := client.Dial(ctx, cfg.AccountingAddr, token)
	if err != nil {
		return configError{err}
	}
	defer func() { _ = conn.Close() }()
	ledgerClient := ledgerclient.New(accountingv1.NewLedgerServiceClient(conn), ledgerclient.Options{Log: log})
	svc, err := lifecycle.New(lifecycle.Config{
		Catalog: cat, Ledger: ledgerClient, Counter: counter, Log: log,
		Webhooks: &webhook.Validator{OwnHosts: cfg.PublicHosts},
	})
	if err != nil {
		return err
	}

	lis, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return configError{err}
	}
	mlis, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		_ = lis.Close()
		return configError{err}
	}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, envoy.New(svc, log))

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		// Ready once the change stream to accounting is up: accounting is reachable and
		// the key cache is coherent.
		if !ledgerClient.Connected() {
			http.Error(w, "accounting change stream not connected", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("/metrics", promhttp.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go ledgerClient.Watch(wctx)

	errc := make(chan error, 2)
	go func() { errc <- gs.Serve(lis) }()
	go func() {
		if err := hs.Serve(mlis); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	log.Info("extproc listening", zap.String("grpc", lis.Addr().String()), zap.String("health", mlis.Addr().String()),
		zap.String("accounting", cfg.AccountingAddr), zap.Int("models", len(cat.Models())))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	log.Info("extproc stopping")
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(cfg.StopTimeout):
		gs.Stop()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return serveErr
}
