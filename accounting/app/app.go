// Package app is the accounting service's process: configuration from flags and
// environment, the database (created when missing, migrated), the reservation
// sweeper, the gRPC server with its credentials, the health and metrics endpoints, and
// an orderly shutdown. cmd/accounting only wires signals and calls Main.
//
// With --migrate-only it ensures the database exists, applies pending migrations and
// exits 0, needing only DATABASE_URL (and libpq's PGSSL* variables, which pgx reads):
// no tokens, no listeners. That is the Kubernetes migrations Job.
//
// Each role (service, admin) accepts several tokens at once, for rotation without an
// outage: comma-separated in the environment variable, or one per line in the file.
//
// On stop, the gRPC server stops gracefully within --shutdown-timeout (unary calls in
// flight finish; watch streams end at once), then cuts what is left.
//
// It wires packages together and holds no ledger logic: the domain is
// accounting/ledger, the derived tables accounting/tables, the wire accounting/server.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/llmgw/gateway/accounting/alerts"
	"github.com/llmgw/gateway/accounting/authn"
	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/engine"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/metrics"
	"github.com/llmgw/gateway/accounting/server"
	"github.com/llmgw/gateway/accounting/tables"
	"github.com/llmgw/gateway/internal/logging"
	"github.com/llmgw/gateway/internal/pprof"
	"github.com/llmgw/gateway/internal/tracing"
)

// Defaults and the environment variables that override them.
const (
	DefaultListen        = "127.0.0.1:50052"
	DefaultDatabaseURL   = "postgres://postgres@127.0.0.1:5432/gateway?sslmode=disable"
	DefaultMetricsListen = "127.0.0.1:9102"

	EnvListen        = "ACCOUNTING_ADDR"
	EnvDatabaseURL   = "DATABASE_URL"
	EnvMetricsListen = "ACCOUNTING_METRICS_ADDR"

	EnvDBMaxConns         = "ACCOUNTING_DB_MAX_CONNS"
	EnvDBLockTimeout      = "ACCOUNTING_DB_LOCK_TIMEOUT"
	EnvDBStatementTimeout = "ACCOUNTING_DB_STATEMENT_TIMEOUT"
	EnvPprof              = "ACCOUNTING_PPROF"
	EnvArchiveAfter       = "ACCOUNTING_ARCHIVE_AFTER"
	EnvWebhookRetention   = "ACCOUNTING_WEBHOOK_RETENTION"
	EnvAdvertise          = "ACCOUNTING_ADVERTISE_ADDR"
	EnvLedgerLease        = "ACCOUNTING_LEDGER_LEASE"
)

// Config is everything the process needs; parseConfig fills it from flags, the
// environment and the defaults above.
type Config struct {
	Listen        string
	DatabaseURL   string
	MetricsListen string
	Tokens        authn.TokenSets
	// MigrateOnly: ensure the database, apply migrations, exit.
	MigrateOnly bool
	// SweepInterval is how often held reservations past their expiry are released.
	SweepInterval time.Duration
	// ArchiveAfter is how long after its settlement a reservation moves to the archive
	// at a sweep (tables.Store.ArchiveSettled); 0: never.
	ArchiveAfter time.Duration
	// WebhookRetention is how long after its delivery an alert's delivery (and then the
	// event, once none of its deliveries is left) is deleted at a sweep
	// (alerts.Webhooks.Prune); 0: never.
	WebhookRetention time.Duration
	// ShutdownTimeout bounds the graceful stop before in-flight calls are cut.
	ShutdownTimeout time.Duration
	// DB sizes the database pool and bounds waits on it (MaxConns, LockTimeout,
	// StatementTimeout; zero fields take the store's defaults).
	DB tables.Options
	// LedgerLease is how long the journal engine's ownership lasts unrenewed: a standby
	// takes over about this long after the owner died.
	LedgerLease time.Duration
	// Advertise is the address clients reach this process at, told by a standby to
	// callers that reached it instead of the owner (default: Listen).
	Advertise string
	// Pprof serves Go's runtime profiles under /debug/pprof/ on the metrics listener
	// (--pprof, env ACCOUNTING_PPROF; off by default).
	Pprof bool
}

// sweepBatch is how many expired reservations one ExpireDue call releases, and
// archiveBatch how many settled ones one ArchiveSettled call moves; the sweeper calls
// again at once while batches come back full, up to archiveBatches archive calls a
// sweep (tables.ArchiveBatchesPerSweep says why).
const (
	sweepBatch     = 500
	archiveBatch   = tables.ArchiveBatch
	archiveBatches = tables.ArchiveBatchesPerSweep
)

// Main runs the service until ctx ends and returns the process exit code: 0 after a
// clean shutdown, 2 for bad flags or configuration, 1 for any other failure. Logs are
// JSON lines on stderr.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	cfg, err := parseConfig(args, os.Getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "accounting: %v\n", err)
		return 2
	}
	log, stopLog := logging.Buffered(stderr, "accounting")
	defer stopLog()
	if cfg.MigrateOnly {
		if err := Migrate(ctx, cfg.DatabaseURL, log); err != nil {
			log.Error("migration failed", zap.Error(err))
			return 1
		}
		return 0
	}
	if err := Run(ctx, cfg, log); err != nil {
		log.Error("accounting failed", zap.Error(err))
		return 1
	}
	return 0
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	envOr := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("accounting", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := Config{}
	fs.StringVar(&cfg.Listen, "listen", envOr(EnvListen, DefaultListen), "gRPC listen address (env "+EnvListen+")")
	fs.StringVar(&cfg.DatabaseURL, "database-url", envOr(EnvDatabaseURL, DefaultDatabaseURL), "PostgreSQL URL (env "+EnvDatabaseURL+")")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", envOr(EnvMetricsListen, DefaultMetricsListen), "health and metrics HTTP address (env "+EnvMetricsListen+")")
	serviceFile := fs.String("service-token-file", "", "file holding the service token (else env "+authn.EnvServiceToken+")")
	adminFile := fs.String("admin-token-file", "", "file holding the admin token (else env "+authn.EnvAdminToken+")")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", time.Second, "how often expired reservations are released")
	fs.DurationVar(&cfg.ArchiveAfter, "archive-after", tables.DefaultArchiveAfter, "how long after its settlement a reservation moves to reservations_archive, at least "+tables.MinArchiveAfter.String()+"; 0: never (env "+EnvArchiveAfter+")")
	fs.DurationVar(&cfg.WebhookRetention, "webhook-retention", alerts.DefaultRetention, "how long a delivered alert's webhook delivery and event are kept, at least "+alerts.MinRetention.String()+"; undelivered ones are kept; 0: forever (env "+EnvWebhookRetention+")")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "graceful stop deadline")
	fs.Func("db-max-conns", "database pool size (env "+EnvDBMaxConns+"; default 4 per core, 8 to 32)", intFlag(&cfg.DB.MaxConns))
	fs.DurationVar(&cfg.DB.LockTimeout, "db-lock-timeout", tables.DefaultLockTimeout, "longest wait of a database statement for a row lock (env "+EnvDBLockTimeout+")")
	fs.DurationVar(&cfg.DB.StatementTimeout, "db-statement-timeout", tables.DefaultStatementTimeout, "longest database statement (env "+EnvDBStatementTimeout+")")
	fs.DurationVar(&cfg.LedgerLease, "ledger-lease", engine.DefaultLease, "how long the journal engine's owner holds the ledger unrenewed; a standby takes over about this long after the owner died (env "+EnvLedgerLease+")")
	fs.StringVar(&cfg.Advertise, "advertise", envOr(EnvAdvertise, ""), "address clients reach this process at (default: --listen) (env "+EnvAdvertise+")")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve Go's runtime profiles under /debug/pprof/ on the metrics address (env "+EnvPprof+")")
	fs.BoolVar(&cfg.MigrateOnly, "migrate-only", false, "create the database if missing, apply pending migrations and exit (needs only "+EnvDatabaseURL+")")
	for flagName, env := range map[string]string{"ledger-lease": EnvLedgerLease, "db-max-conns": EnvDBMaxConns, "db-lock-timeout": EnvDBLockTimeout,
		"db-statement-timeout": EnvDBStatementTimeout, "pprof": EnvPprof,
		"archive-after": EnvArchiveAfter, "webhook-retention": EnvWebhookRetention} {
		if v := getenv(env); v != "" {
			if err := fs.Set(flagName, v); err != nil {
				return Config{}, fmt.Errorf("%s: %w", env, err)
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var errs []error
	var err error
	if !cfg.MigrateOnly {
		if cfg.Tokens.Service, err = authn.LoadTokens(*serviceFile, authn.EnvServiceToken, getenv); err != nil {
			errs = append(errs, err)
		}
		if cfg.Tokens.Admin, err = authn.LoadTokens(*adminFile, authn.EnvAdminToken, getenv); err != nil {
			errs = append(errs, err)
		}
		if len(errs) == 0 {
			if err := cfg.Tokens.Validate(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if cfg.SweepInterval <= 0 {
		errs = append(errs, errors.New("--sweep-interval must be positive"))
	}
	if cfg.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	if cfg.ArchiveAfter != 0 && cfg.ArchiveAfter < tables.MinArchiveAfter {
		errs = append(errs, fmt.Errorf("--archive-after must be 0 or at least %v", tables.MinArchiveAfter))
	}
	if cfg.WebhookRetention != 0 && cfg.WebhookRetention < alerts.MinRetention {
		errs = append(errs, fmt.Errorf("--webhook-retention must be 0 or at least %v", alerts.MinRetention))
	}
	if cfg.DB.MaxConns < 0 || cfg.DB.LockTimeout <= 0 || cfg.DB.StatementTimeout <= 0 {
		errs = append(errs, errors.New("--db-lock-timeout and --db-statement-timeout must be positive, --db-max-conns not negative"))
	}
	if _, err := url.Parse(cfg.DatabaseURL); err != nil {
		errs = append(errs, errors.New("--database-url is not a URL"))
	}
	if cfg.LedgerLease < 100*time.Millisecond {
		errs = append(errs, errors.New("--ledger-lease must be at least 100ms"))
	}
	if cfg.Advertise == "" {
		cfg.Advertise = cfg.Listen
	}
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("refusing to start: %w", errors.Join(errs...))
	}
	return cfg, nil
}

// redactURL drops the password from a database URL, for logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

// connectionURL drops pgxpool's own "pool_*" parameters, which a plain connection
// would send to the server as unknown settings.
func connectionURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Migrate creates the database of databaseURL when it is missing and applies the
// pending migrations (tables.Open migrates, serialized by an advisory lock).
func Migrate(ctx context.Context, databaseURL string, log *zap.Logger) error {
	log.Info("migrating ledger database", zap.String("database", redactURL(databaseURL)))
	st, err := openStore(ctx, databaseURL, tables.Options{})
	if err != nil {
		return err
	}
	st.Close()
	log.Info("ledger database migrated")
	return nil
}

func openStore(ctx context.Context, databaseURL string, opts tables.Options) (*tables.Store, error) {
	if err := tables.EnsureDatabase(ctx, connectionURL(databaseURL)); err != nil {
		return nil, fmt.Errorf("ensure database: %w", err)
	}
	st, err := tables.Open(ctx, databaseURL, opts)
	if err != nil {
		return nil, fmt.Errorf("open ledger store: %w", err)
	}
	return st, nil
}

// Run serves until ctx ends, then stops gracefully within cfg.ShutdownTimeout.
func Run(ctx context.Context, cfg Config, log *zap.Logger) error {
	stopTracing, err := tracing.Setup(ctx, "accounting")
	if err != nil {
		return err
	}
	defer func() { _ = stopTracing(context.WithoutCancel(ctx)) }()
	az, err := authn.NewSetAuthorizer(cfg.Tokens)
	if err != nil {
		return err
	}
	log.Info("opening ledger database", zap.String("database", redactURL(cfg.DatabaseURL)))
	st, err := openStore(ctx, cfg.DatabaseURL, cfg.DB)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	own := newOwner(cfg, log, st)
	// The engine outlives the gRPC server's graceful stop, so that calls in flight are
	// answered; then the materializer catches up with what it decided.
	ownCtx, stopOwner := context.WithCancel(context.WithoutCancel(ctx))
	defer func() { stopOwner(); own.wait() }()
	own.ctx = ownCtx
	return serve(ctx, cfg, log, az, own)
}

// serve runs the listeners, the hub and the sweeper over the ledger own decides.
func serve(ctx context.Context, cfg Config, log *zap.Logger, az *authn.Authorizer, own *owner) error {
	m := metrics.New()
	// The journal engine's batching point: appends carry the operations.
	m.CountGroupCommit(func() (int64, int64, int64) {
		appends, _, ops := own.engine.Stats()
		return appends, ops, 0
	})
	m.WatchOwner(own.engine.Owning)
	m.CountJournal(own.engine.AppendErrors, own.engine.Takeovers)
	st := m.WrapStore(own.store)
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	mlis, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		_ = lis.Close()
		return fmt.Errorf("listen for health: %w", err)
	}

	// The metrics interceptor runs first, so refused credentials are timed too.
	opts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(m.UnaryServerInterceptor())}, az.ServerOptions()...)
	// The address a standby tells callers: --advertise, else where it listens.
	bound := false
	if _, port, _ := net.SplitHostPort(cfg.Advertise); port == "0" || cfg.Advertise == cfg.Listen {
		cfg.Advertise = lis.Addr().String()
		// A specific IP this process listens on: no other live process holds it.
		ta, ok := lis.Addr().(*net.TCPAddr)
		bound = ok && !ta.IP.IsUnspecified()
	}
	own.start(own.ctx, cfg.Advertise, bound)
	// After the credentials check: a standby sends its calls on to the owner.
	fw := &forwarder{engine: own.engine, self: cfg.Advertise, counted: m.CountSecondHop}
	defer fw.close()
	opts = append(opts, grpc.ChainUnaryInterceptor(fw.unary))
	if tracing.Enabled(os.Getenv) {
		// Each call is a span joined to the caller's trace. While tracing is off no
		// handler runs (even a no-op one costs each call some work).
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler()))
	}
	opts = append(opts,
		// The fixed receive windows of every accounting connection (client.Window).
		grpc.InitialWindowSize(client.Window), grpc.InitialConnWindowSize(client.ConnWindow),
		grpc.NumStreamWorkers(StreamWorkers),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	)
	hub := server.NewHub(st, log.Named("changes"), 0)
	hookKeys, err := alerts.LoadKeys(os.Getenv)
	if err != nil {
		_, _ = lis.Close(), mlis.Close()
		return err
	}
	admin := tables.New(own.pool, tables.Options{}) // members: a plain table
	webhooks := &alerts.Webhooks{Pool: own.pool, Keys: hookKeys}
	srv := server.New(st, hub, server.Options{Logger: log.Named("grpc"), Observe: m.ObserveCall,
		Webhooks: webhooks, Members: admin, Audit: own.store})
	// After the credentials and the forwarding: the owner authorizes the calls made
	// for a person (the console's), by the person's memberships.
	opts = append(opts, grpc.ChainUnaryInterceptor(srv.Authorize()))
	gs := grpc.NewServer(opts...)
	srv.Register(gs)
	// The owner delivers the alerts' webhooks; a standby's worker waits.
	hooks := &alerts.Worker{Pool: own.pool, Keys: hookKeys, Owning: own.engine.Owning, Log: log.Named("webhooks"),
		Observer: m.Alerts()}

	sw := &sweeper{store: st, log: log.Named("sweeper"), interval: cfg.SweepInterval, grace: own.store.GraceLapsed}
	if cfg.ArchiveAfter > 0 {
		sw.archive, sw.archiveAfter = m.CountArchive(own.store.ArchiveSettled), cfg.ArchiveAfter
	}
	if cfg.WebhookRetention > 0 {
		sw.prune, sw.retention = webhooks.Prune, cfg.WebhookRetention
	}
	var serving atomic.Bool
	// Ready says what this replica can do: the owner, with its lease in force and its
	// sweeps reaching the database; a standby that follows the journal and knows the
	// owner (it sends its callers there). Neither depends on having owned the ledger
	// before: a fenced owner, or one cut off from the database, is ready again as soon
	// as it follows the journal as a standby.
	ready := func() error {
		switch err := own.engine.Ready(sw.awayAfter()); {
		case !serving.Load():
			return errors.New("not serving")
		case err != nil:
			return err
		case own.engine.Owning() && sw.away():
			return errors.New("database unreachable")
		}
		return nil
	}
	hs := &http.Server{Handler: pprof.Wrap(healthMux(ready, m.Handler()), cfg.Pprof), ReadHeaderTimeout: 5 * time.Second}

	// Background work stops with bgCtx; the gRPC server is stopped explicitly.
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); hooks.Run(bgCtx) }()
	go func() { defer wg.Done(); hub.Run(bgCtx) }()
	go func() { defer wg.Done(); sw.run(bgCtx) }()
	go func() {
		defer wg.Done()
		if err := hs.Serve(mlis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health server failed", zap.Error(err))
		}
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- gs.Serve(lis) }()
	serving.Store(true)
	log.Info("accounting listening", zap.String("addr", lis.Addr().String()),
		zap.String("metrics_addr", mlis.Addr().String()))

	var result error
	select {
	case <-ctx.Done():
		log.Info("accounting stopping")
	case err := <-serveErr:
		result = fmt.Errorf("grpc server: %w", err)
	case <-own.engine.Failed():
		// Fail-stop: exit, so that the process restarts as a standby of the new owner.
		result = fmt.Errorf("ledger owner: %w", own.engine.Err())
	}
	serving.Store(false)
	// Watch streams never end on their own: stopping the hub ends them, so that the
	// graceful stop only waits for unary calls in flight.
	stopBG()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	t := time.NewTimer(cfg.ShutdownTimeout)
	select {
	case <-stopped:
		t.Stop()
	case <-t.C:
		log.Warn("graceful stop timed out; closing remaining calls")
		gs.Stop()
		<-stopped
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	_ = hs.Shutdown(shutCtx)
	wg.Wait()
	log.Info("accounting stopped")
	return result
}

// healthMux serves /healthz (liveness: the process is up and serves HTTP; it says
// nothing of the database or the ledger, so that a replica is never restarted for what
// a restart cannot cure), /readyz (readiness: ready is nil, else 503 with its reason)
// and /metrics.
func healthMux(ready func() error, metricsHandler http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metricsHandler)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// ExpiryGrace is how long a hold whose lease ran out while accounting was away is kept
// once accounting is back, before the sweeper expires it. Its owner could not renew it
// while accounting was away; it is back within a second or two (its reconnect back-off
// is at most client.MaxReconnectDelay, its keeper retries a renewal every second and a
// settlement at least every 2 s, each attempt bounded by 5 s), and then renews or
// settles the hold. A hold whose owner died meanwhile frees this much later.
const ExpiryGrace = 30 * time.Second

// sweeper releases held reservations past their expiry and, with archive, moves
// reservations settled archiveAfter ago to the archive; with prune, it deletes alerts'
// webhook deliveries delivered retention ago and their events. Every replica runs one:
// the store lets any number run at once.
//
// After accounting was away — starting, paused, or cut off from the database, so that
// no sweep reached it for longer than awayAfter — its first sweep gives the leases that
// ran out meanwhile ExpiryGrace (grace, tables.Store.GraceLapsed) before it expires any.
type sweeper struct {
	store    ledger.Decisions
	log      *zap.Logger
	interval time.Duration

	grace        func(context.Context, time.Duration) (int, error) // nil: no grace
	archive      metrics.ArchiveFunc                               // nil: nothing is archived
	archiveAfter time.Duration
	prune        metrics.ArchiveFunc // alerts.Webhooks.Prune; nil: alerts are kept
	retention    time.Duration

	lastOK         atomic.Int64 // unix nanos of the last successful sweep
	failing        atomic.Bool
	archiveFailing atomic.Bool
	pruneFailing   atomic.Bool
}

// awayAfter is how long without a sweep that reached the database makes accounting
// "away": unready (/readyz), and owed a grace by the leases that ran out meanwhile.
func (s *sweeper) awayAfter() time.Duration { return 3*s.interval + 2*time.Second }

// away reports whether no sweep reached the database within awayAfter (or none yet).
func (s *sweeper) away() bool { return !s.healthy(s.awayAfter()) }

func (s *sweeper) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep expires due reservations, then archives settled ones (with archive) and deletes
// old delivered alerts (with prune), each in batches until a batch comes back short.
func (s *sweeper) sweep(ctx context.Context) {
	if s.grace != nil && s.away() && !s.graceLapsed(ctx) {
		return // nothing expires before the leases that ran out got their grace
	}
	total := s.inBatches(ctx, "expiring reservations", sweepBatch, 0, &s.failing, func(ctx context.Context, limit int) (int, error) {
		n, err := s.store.ExpireDue(ctx, limit)
		if err == nil {
			s.lastOK.Store(time.Now().UnixNano())
		}
		return n, err
	})
	if total > 0 {
		s.log.Info("expired reservations", zap.Int("count", total))
	}
	// Archiving does not count for the sweeper's health: expiry frees credits,
	// archiving only keeps the hot table small.
	if s.archive != nil {
		s.inBatches(ctx, "archiving settled reservations", archiveBatch, archiveBatches, &s.archiveFailing,
			func(ctx context.Context, limit int) (int, error) { return s.archive(ctx, s.archiveAfter, limit) })
	}
	if s.prune != nil {
		s.inBatches(ctx, "deleting delivered webhook alerts", archiveBatch, archiveBatches, &s.pruneFailing,
			func(ctx context.Context, limit int) (int, error) { return s.prune(ctx, s.retention, limit) })
	}
}

// graceLapsed gives the leases that ran out while accounting was away ExpiryGrace, and
// reports whether it reached the database (a failure is logged as expiry's: the grace
// is the first step of expiring).
func (s *sweeper) graceLapsed(ctx context.Context) bool {
	var n int
	s.inBatches(ctx, "expiring reservations", 1, 1, &s.failing, func(ctx context.Context, _ int) (int, error) {
		var err error
		if n, err = s.grace(ctx, ExpiryGrace); err == nil {
			s.lastOK.Store(time.Now().UnixNano())
		}
		return n, err
	})
	if s.away() {
		return false
	}
	if n > 0 {
		s.log.Info("holds whose lease ran out while accounting was away get a grace period",
			zap.Int("count", n), zap.Duration("grace", ExpiryGrace))
	}
	return true
}

// inBatches calls step for batches of at most batch until one comes back short or
// fails, or maxBatches were made (0: no bound), and returns how many the batches
// handled. A failure is logged when it starts (failing turns true) and again when a
// batch succeeds after it, not every sweep.
func (s *sweeper) inBatches(ctx context.Context, what string, batch, maxBatches int, failing *atomic.Bool,
	step func(context.Context, int) (int, error)) int {
	total := 0
	for i := 0; ctx.Err() == nil && (maxBatches == 0 || i < maxBatches); i++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := step(cctx, batch)
		cancel()
		if err != nil {
			if ctx.Err() == nil && !failing.Swap(true) {
				s.log.Warn(what+" failed", zap.Error(err))
			}
			break
		}
		if failing.Swap(false) {
			s.log.Info(what + " works again")
		}
		total += n
		if n < batch {
			break
		}
	}
	return total
}

func (s *sweeper) healthy(maxAge time.Duration) bool {
	last := s.lastOK.Load()
	return last != 0 && time.Since(time.Unix(0, last)) <= maxAge
}

// intFlag parses a flag value into an int32.
func intFlag(p *int32) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		*p = int32(n)
		return err
	}
}

// StreamWorkers is how many goroutines of accounting's gRPC server serve calls one after
// another, each keeping the stack it grew (google.golang.org/grpc server.go,
// serverWorker): a call on a new goroutine grew its stack from scratch in the store and
// pgx (runtime.newstack ≈5 % of the Go side of BenchmarkGRPCReserveCommit). When every
// worker is busy a call gets a goroutine of its own, as before.
const StreamWorkers = 32
