// Package app is the extproc binary as a library: Main parses flags and environment,
// loads the catalog and the tokenizer, dials accounting, serves the ext_proc gRPC API
// and, on the same port, the catalog's upstream clusters over xDS (ADS), and the
// health/metrics HTTP endpoints, and stops gracefully when ctx ends. The main
// package only wires signals to ctx and calls Main, so the whole binary is testable.
//
// # Health
//
// /healthz is liveness only (the process serves HTTP). /readyz is ready while the
// change stream to accounting is connected (accounting is reachable and the key cache
// coherent) and the process is not draining.
//
// # Drain
//
// When ctx ends (SIGTERM), extproc turns not ready, stops accepting ext_proc streams
// and lets the open ones finish, for at most DrainTimeout. Streams still open then are
// cut; each one's handler still runs the lifecycle's End, which settles its reservation
// by the settlement policy. Settlements run in the background after the reply, so the
// process then waits for them (each runs until accounting answers it), for at most
// HoldLease, before it closes the accounting connection and exits. So exit comes at most
// DrainTimeout + HoldLease after the signal, and with a hold unsettled only when
// accounting was unreachable all that time (the hold then expires with its lease).
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/authn"
	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/envoy"
	"github.com/llmgw/gateway/extproc/health"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/metrics"
	"github.com/llmgw/gateway/extproc/tokens"
	"github.com/llmgw/gateway/extproc/webhook"
	"github.com/llmgw/gateway/extproc/xds"
	"github.com/llmgw/gateway/internal/logging"
	"github.com/llmgw/gateway/internal/pprof"
	"github.com/llmgw/gateway/internal/telemetry"
	"github.com/llmgw/gateway/internal/tracing"
	"github.com/llmgw/gateway/internal/vtcodec"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
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
	// DrainTimeout bounds how long in-flight streams may run on after the stop signal
	// (EXTPROC_DRAIN_TIMEOUT, --drain-timeout); streams still open then are cut and
	// settled.
	DrainTimeout time.Duration
	// HoldLease is the lease of every hold extproc takes (EXTPROC_HOLD_LEASE,
	// --hold-lease): renewed every third of it while its request runs, so the holds of
	// a process that died free within it.
	HoldLease time.Duration
	// CatalogPoll is how often the catalog file is read for changes
	// (EXTPROC_CATALOG_POLL, 2s): a valid change serves new requests at once.
	CatalogPoll time.Duration
	// Pprof serves Go's runtime profiles under /debug/pprof/ on the metrics listener
	// (EXTPROC_PPROF, --pprof; off by default).
	Pprof bool
	// Failover routes a chat request whose tier sees two channels or more through its
	// failover cluster, served over xDS with the channels' health (EXTPROC_FAILOVER,
	// --failover; on by default). Off, each request goes to the one channel it picked.
	Failover bool
	// AuthFailures bounds the failed keys answered 401 per client address before they
	// are answered 429 (EXTPROC_AUTH_FAILURE_BURST, --auth-failure-burst;
	// EXTPROC_AUTH_FAILURE_RATE, --auth-failure-rate; lifecycle.AuthFailures).
	AuthFailures lifecycle.AuthFailures
}

// EnvoyExtprocCluster is the name of extproc's cluster in envoy.yaml: the failover
// clusters' attempt ext_proc reaches extproc through it.
const EnvoyExtprocCluster = "extproc"

// DefaultDrainTimeout is the drain deadline when none is configured.
const DefaultDrainTimeout = 30 * time.Second

// Defaults returns the configuration from the environment (EXTPROC_ADDR,
// ACCOUNTING_ADDR, GATEWAY_SERVICE_TOKEN, GATEWAY_CATALOG, EXTPROC_METRICS_ADDR,
// GATEWAY_PUBLIC_HOSTS, EXTPROC_DRAIN_TIMEOUT, EXTPROC_HOLD_LEASE, EXTPROC_PPROF,
// EXTPROC_FAILOVER, EXTPROC_AUTH_FAILURE_BURST,
// EXTPROC_AUTH_FAILURE_RATE) with the local stack's defaults. An
// unparsable value is an error.
func Defaults(getenv func(string) string) (Config, error) {
	or := func(k, d string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return d
	}
	cfg := Config{
		ListenAddr:     or("EXTPROC_ADDR", "127.0.0.1:50051"),
		AccountingAddr: or("ACCOUNTING_ADDR", "127.0.0.1:50052"),
		ServiceToken:   getenv("GATEWAY_SERVICE_TOKEN"),
		CatalogPath:    or("GATEWAY_CATALOG", "deploy/local/catalog.yaml"),
		MetricsAddr:    or("EXTPROC_METRICS_ADDR", "127.0.0.1:9101"),
		PublicHosts:    webhook.ParseOwnHosts(getenv("GATEWAY_PUBLIC_HOSTS")),
		DrainTimeout:   DefaultDrainTimeout,
		HoldLease:      lifecycle.DefaultLeaseTTL,
		CatalogPoll:    2 * time.Second,
		Failover:       true,
		AuthFailures:   lifecycle.AuthFailures{Burst: lifecycle.DefaultAuthFailureBurst, Rate: lifecycle.DefaultAuthFailureRate},
	}
	if v := getenv("EXTPROC_AUTH_FAILURE_BURST"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("EXTPROC_AUTH_FAILURE_BURST: %q is not a positive integer", v)
		}
		cfg.AuthFailures.Burst = n
	}
	if v := getenv("EXTPROC_AUTH_FAILURE_RATE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return cfg, fmt.Errorf("EXTPROC_AUTH_FAILURE_RATE: %q is not a positive number", v)
		}
		cfg.AuthFailures.Rate = f
	}
	if v := getenv("EXTPROC_FAILOVER"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("EXTPROC_FAILOVER: %w", err)
		}
		cfg.Failover = on
	}
	for name, p := range map[string]*time.Duration{"EXTPROC_DRAIN_TIMEOUT": &cfg.DrainTimeout, "EXTPROC_HOLD_LEASE": &cfg.HoldLease, "EXTPROC_CATALOG_POLL": &cfg.CatalogPoll} {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return cfg, fmt.Errorf("%s: %w", name, err)
			}
			*p = d
		}
	}
	on, err := pprof.Enabled(getenv("EXTPROC_PPROF"))
	if err != nil {
		return cfg, fmt.Errorf("EXTPROC_PPROF: %w", err)
	}
	cfg.Pprof = on
	return cfg, nil
}

// Main runs extproc until ctx ends and returns the process exit code: 0 after a
// graceful stop, 2 for bad flags or configuration, 1 when serving failed.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	cfg, err := Defaults(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "extproc: %v\n", err)
		return 2
	}
	fs := flag.NewFlagSet("extproc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.ListenAddr, "listen", cfg.ListenAddr, "ext_proc gRPC listen address (env EXTPROC_ADDR)")
	fs.StringVar(&cfg.AccountingAddr, "accounting-addr", cfg.AccountingAddr, "accounting gRPC target, or a comma-separated list of its replicas' host:port (env ACCOUNTING_ADDR)")
	fs.StringVar(&cfg.ServiceTokenFile, "service-token-file", "", "file holding the accounting service token (else env GATEWAY_SERVICE_TOKEN)")
	fs.StringVar(&cfg.CatalogPath, "catalog", cfg.CatalogPath, "model catalog YAML (env GATEWAY_CATALOG)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", cfg.MetricsAddr, "health and metrics HTTP address (env EXTPROC_METRICS_ADDR)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, "how long in-flight streams may finish after SIGTERM before they are cut and settled (env EXTPROC_DRAIN_TIMEOUT)")
	fs.DurationVar(&cfg.CatalogPoll, "catalog-poll", cfg.CatalogPoll, "how often the catalog file is read for changes (env EXTPROC_CATALOG_POLL)")
	fs.DurationVar(&cfg.HoldLease, "hold-lease", cfg.HoldLease, "lease of every hold, renewed every third of it while its request runs (env EXTPROC_HOLD_LEASE)")
	fs.BoolVar(&cfg.Pprof, "pprof", cfg.Pprof, "serve Go's runtime profiles under /debug/pprof/ on the metrics address (env EXTPROC_PPROF)")
	fs.BoolVar(&cfg.Failover, "failover", cfg.Failover, "route chat requests with several channels through their failover clusters (env EXTPROC_FAILOVER)")
	fs.IntVar(&cfg.AuthFailures.Burst, "auth-failure-burst", cfg.AuthFailures.Burst, "failed API keys answered 401 per client address at once; further ones are answered 429 (env EXTPROC_AUTH_FAILURE_BURST)")
	fs.Float64Var(&cfg.AuthFailures.Rate, "auth-failure-rate", cfg.AuthFailures.Rate, "failed API keys per second and client address refilled into the burst (env EXTPROC_AUTH_FAILURE_RATE)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.AuthFailures.Burst <= 0 || !(cfg.AuthFailures.Rate > 0) || math.IsInf(cfg.AuthFailures.Rate, 0) {
		fmt.Fprintln(stderr, "extproc: --auth-failure-burst and --auth-failure-rate must be positive")
		return 2
	}
	if cfg.DrainTimeout <= 0 {
		fmt.Fprintln(stderr, "extproc: --drain-timeout must be positive")
		return 2
	}
	if cfg.HoldLease < 3*time.Second {
		fmt.Fprintln(stderr, "extproc: --hold-lease must be at least 3s")
		return 2
	}
	log, stopLog := logging.Buffered(stderr, "extproc")
	defer stopLog()
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

func run(ctx context.Context, cfg Config, log *zap.Logger) error {
	token := cfg.ServiceToken
	if cfg.ServiceTokenFile != "" {
		// The file accounting reads, in its rotation shape: the first token is presented.
		t, err := authn.LoadToken(cfg.ServiceTokenFile, "", nil)
		if err != nil {
			return configError{fmt.Errorf("service token: %w", err)}
		}
		token = t
	}
	if token == "" {
		return configError{errors.New("no accounting service token: set GATEWAY_SERVICE_TOKEN or --service-token-file")}
	}
	source, err := catalog.LoadSource(cfg.CatalogPath)
	if err != nil {
		return configError{err}
	}
	cat := source.Current()
	counter, err := tokens.New()
	if err != nil {
		return err
	}
	stopTracing, err := tracing.Setup(ctx, "extproc")
	if err != nil {
		return configError{err}
	}
	defer func() { _ = stopTracing(context.WithoutCancel(ctx)) }()
	otlpReader, err := telemetry.MetricReader(ctx, os.Getenv)
	if err != nil {
		return configError{err}
	}
	res, err := telemetry.Resource("extproc")
	if err != nil {
		return configError{err}
	}
	m := metrics.New(cat, metrics.WithReader(otlpReader), metrics.WithResource(res),
		metrics.WithLatestGenAI(telemetry.LatestGenAI(os.Getenv)))
	// Deferred before the ledger connection closes, so it runs after: the last
	// requests' records are in the final OTLP push.
	defer func() { _ = m.Shutdown(context.WithoutCancel(ctx)) }()
	m.SetCatalog(cat, source.Version())
	dialOpts := append(ledgerclient.DialOptions(tracing.Enabled(os.Getenv)), grpc.WithChainUnaryInterceptor(m.AccountingInterceptor()))
	conn, err := client.Dial(ctx, cfg.AccountingAddr, token, dialOpts...)
	if err != nil {
		return configError{err}
	}
	defer func() { _ = conn.Close() }()
	// Each replica the client learns is dialled as the connection is: the calls go to
	// the owner, one hop.
	ledgerClient := ledgerclient.New(accountingv1.NewLedgerServiceClient(conn), ledgerclient.Options{Log: log,
		Dial: func(addr string) (*grpc.ClientConn, error) { return client.Dial(ctx, addr, token, dialOpts...) }})
	defer ledgerClient.Close()
	// A channel's failure is served to Envoy as its endpoint's health at once (and the
	// end of a cooldown within a second, by the loop below).
	healthChanged := make(chan struct{}, 1)
	tracker := health.New(health.Config{Observe: func(name string, f health.Failure) {
		m.ObserveAttempt(name, f)
		select {
		case healthChanged <- struct{}{}:
		default:
		}
	}})
	m.WatchHealth(tracker)
	svc, err := lifecycle.New(lifecycle.Config{
		Source: source, Ledger: ledgerClient, Counter: counter, Log: log, Observers: []lifecycle.Observer{m},
		Webhooks: &webhook.Validator{OwnHosts: cfg.PublicHosts}, LeaseTTL: cfg.HoldLease,
		Health: tracker, Failover: cfg.Failover,
		AuthFailures: cfg.AuthFailures, ObserveAuthFailure: m.ObserveAuthFailure,
	})
	if err != nil {
		return err
	}
	m.WatchSettlements(svc.SettleStats)

	lis, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return configError{err}
	}
	mlis, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		_ = lis.Close()
		return configError{err}
	}
	gs := grpc.NewServer(serverOptions()...)
	srv := envoy.New(svc, log, envoy.WithObserver(m))
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	// The catalog's upstream clusters, served to Envoy over ADS on the same port.
	clusters := xds.New(log.Named("xds"), xds.Options{Failover: cfg.Failover, Healthy: tracker.Usable, ExtprocCluster: EnvoyExtprocCluster})
	if err := clusters.Update(cat, source.Version()); err != nil {
		_ = lis.Close()
		_ = mlis.Close()
		return configError{err}
	}
	clusters.Register(gs)

	var draining atomic.Bool
	hs := &http.Server{Handler: pprof.Wrap(healthMux(ledgerClient.Connected, &draining, m.Handler()), cfg.Pprof), ReadHeaderTimeout: 5 * time.Second}

	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatch()
	go ledgerClient.Watch(wctx)
	if cfg.Failover {
		go refreshHealth(wctx, clusters, healthChanged, log)
	}
	if cfg.CatalogPoll > 0 {
		go source.Watch(wctx, cfg.CatalogPath, cfg.CatalogPoll, func(r catalog.Reload) {
			if r.Err != nil {
				m.CatalogReload(false)
				log.Error("catalog refused: the previous catalog keeps serving", zap.String("version", r.Version),
					zap.String("serving", source.Version()), zap.Error(r.Err))
				return
			}
			if err := clusters.Update(source.Current(), r.Version); err != nil {
				// Parse accepted it, so this is a bug: say so; the previous clusters serve.
				log.Error("catalog clusters not served over xDS", zap.String("version", r.Version), zap.Error(err))
			}
			m.CatalogReload(true)
			m.SetCatalog(source.Current(), r.Version)
			log.Info("catalog reloaded", zap.String("version", r.Version), zap.Int("models", len(source.Current().Models())))
		})
	}

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
	draining.Store(true)
	log.Info("extproc draining", zap.Duration("deadline", cfg.DrainTimeout))
	// Envoy's discovery streams never end on their own: end them so the graceful stop
	// can complete (Envoy keeps its clusters and reconnects to another replica).
	clusters.Stop()
	drain(gs, srv, cfg.DrainTimeout, log)
	wctx2, cancelWait := context.WithTimeout(context.Background(), cfg.HoldLease+5*time.Second)
	defer cancelWait()
	if err := svc.WaitSettled(wctx2); err != nil {
		log.Warn("settlements still running at exit: their holds expire with their leases", zap.Error(err))
	}
	log.Info("extproc stopped: every stream settled")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return serveErr
}

// drain stops gs gracefully: no new streams, open ones may finish within timeout; then
// the rest are cut. It returns once every handler returned (WaitForHandlers), which
// includes each cut stream's settlement.
func drain(gs *grpc.Server, srv *envoy.Server, timeout time.Duration, log *zap.Logger) {
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		log.Warn("drain deadline passed: cutting the streams still open and settling them")
		srv.CutStreams()
		gs.Stop()
		<-stopped
	}
}

// healthMux serves /healthz (liveness), /readyz (connected to accounting and not
// draining) and /metrics.
func healthMux(connected func() bool, draining *atomic.Bool, metricsHandler http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case draining.Load():
			http.Error(w, "draining", http.StatusServiceUnavailable)
		case !connected():
			// The change stream to accounting is down: accounting is unreachable (or
			// refuses the service token) and the key cache is off.
			http.Error(w, "accounting change stream not connected", http.StatusServiceUnavailable)
		default:
			_, _ = io.WriteString(w, "ok\n")
		}
	})
	mux.Handle("/metrics", metricsHandler)
	return mux
}

// KeepaliveMinTime is the shortest PING interval extproc's gRPC server tolerates from
// Envoy. envoy/envoy.yaml's extproc cluster sends HTTP/2 connection_keepalive PINGs
// every 30 s, also when no stream is open; grpc-go's default policy (5 minutes, and
// none without a stream) would answer them with GOAWAY too_many_pings and fail the
// streams in flight on that connection.
const KeepaliveMinTime = 10 * time.Second

// MaxRecvMsgSize bounds one ProcessingRequest: a whole buffered body (Envoy's buffer
// limit, lifecycle.EnvoyBufferLimit) plus headers (HCM max_request_headers_kb, 60 KiB by
// default) and framing, with room to spare: above grpc-go's default (4 MiB), which
// would refuse a body at the buffer limit with RESOURCE_EXHAUSTED (a 500).
const MaxRecvMsgSize = lifecycle.EnvoyBufferLimit + 1<<20

// StreamWindow and ConnWindow are the fixed HTTP/2 receive windows of extproc's gRPC
// server: a whole ProcessingRequest (MaxRecvMsgSize) fits one stream's window, and four
// of them the connection's (what grpc-go's estimation grows it to at most). Fixed windows turn grpc-go's bandwidth estimation
// off: with it, the server answered the first DATA frame after each round trip with a
// WINDOW_UPDATE and a PING of its own (google.golang.org/grpc internal/transport,
// http2Server.handleData and bdpEstimator.add), about one more exchange per request with
// Envoy, which never estimates (its windows are static: the cluster's
// http2_protocol_options, 256 MiB by default).
const (
	StreamWindow = MaxRecvMsgSize
	ConnWindow   = 4 * MaxRecvMsgSize
)

// StreamWorkers is how many goroutines of extproc's gRPC server serve streams one after
// another. Without them each ext_proc stream (one per HTTP request) got a new goroutine,
// whose stack then grew, copied each time, in the ledger call and the JSON walks of its
// request (runtime.newstack ≈7–9 % of extproc's CPU at 1,000 requests/s); a worker keeps
// its grown stack for the next stream (google.golang.org/grpc server.go, serverWorker).
// A stream lasts its request's whole life, so the workers cover the streams usually
// open at once; when all are busy, a stream gets a goroutine of its own as before.
const StreamWorkers = 64

// serverOptions are the ext_proc gRPC server's options. WaitForHandlers: Stop (after
// the drain deadline) returns only once every handler has returned, that is once every
// cut stream has been settled.
func serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.WaitForHandlers(true),
		vtcodec.ServerOption(),
		grpc.NumStreamWorkers(StreamWorkers),
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.InitialWindowSize(StreamWindow),
		grpc.InitialConnWindowSize(ConnWindow),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime: KeepaliveMinTime, PermitWithoutStream: true,
		}),
	}
}

// refreshHealth serves the channels' health over xDS: on every failure at once, and
// every second for the cooldowns that ended (and the probes taken) meanwhile.
func refreshHealth(ctx context.Context, clusters *xds.Server, changed <-chan struct{}, log *zap.Logger) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
		if err := clusters.Refresh(); err != nil {
			log.Error("channel health not served over xDS", zap.Error(err))
		}
	}
}
