// Command ledgersoak drives reserve+commit pairs through the journal engine (its owner,
// journal and materializer, in this process) on a fresh PostgreSQL database and
// reports, every -every pairs, the throughput and what the pairs leave behind in the
// derived tables: heap and index sizes, dead tuples, the share of updates that were HOT
// (heap-only: no new index entries) and how often autovacuum ran. It is the measurement
// behind the tables' storage settings (migration 0004; docs/performance.md). `make soak`
// runs it with 1,000,000 pairs.
//
// The database is created on the server of -server (the tests' server by default) under
// a fresh name and dropped at the end unless -keep. At the end, once the tables hold
// every decision, the ledger's invariants are checked over every row.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/engine"
	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// tables are those a reserve+commit pair writes, in the order reported, and the archive
// settled reservations move to (-archive-after; none before migration 0010).
var soakTables = []string{"accounts", "key_spend", "usage_daily", "reservations", "ledger_entries", "reservations_archive"}

type config struct {
	server             string
	n, every           int
	accounts, callers  int
	conns              int
	keep, noCheck      bool
	amount, actual     int64
	hold, archiveAfter time.Duration
	cpuProfile         string
}

func main() {
	var c config
	flag.StringVar(&c.server, "server", tablestest.ServerURL(), "URL of a database on the PostgreSQL server to create the soak's database on (default: "+tablestest.EnvURL+", else the local server)")
	flag.IntVar(&c.n, "n", 1_000_000, "reserve+commit pairs to run")
	flag.IntVar(&c.every, "every", 100_000, "report after every this many pairs")
	flag.IntVar(&c.accounts, "accounts", 256, "accounts (one limited key each) the pairs are spread over")
	flag.IntVar(&c.callers, "callers", 32, "goroutines calling Reserve then Commit")
	flag.IntVar(&c.conns, "conns", 32, "the database pool's size")
	flag.BoolVar(&c.keep, "keep", false, "keep the database at the end (its name is printed)")
	flag.BoolVar(&c.noCheck, "no-check", false, "skip the invariant check at the end")
	flag.Int64Var(&c.amount, "amount", 2_000, "micro-credits each reserve holds")
	flag.Int64Var(&c.actual, "actual", 1_500, "micro-credits each commit charges")
	flag.DurationVar(&c.archiveAfter, "archive-after", 0, "move reservations settled this long ago to the archive every second meanwhile, as accounting's sweeper does (at least "+tables.MinArchiveAfter.String()+"); 0: never")
	flag.DurationVar(&c.hold, "hold", 0, "keep a snapshot open all along, renewed every this long (a long report, a backup or a replica's feedback: pruning and VACUUM cannot remove what it may see); 0: none")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of each report's interval to this path with the interval's number appended (.1, .2, ...)")
	flag.Parse()
	if c.n <= 0 || c.every <= 0 || c.accounts <= 0 || c.callers <= 0 || c.conns <= 0 {
		fmt.Fprintln(os.Stderr, "ledgersoak: -n, -every, -accounts, -callers and -conns must be positive")
		os.Exit(2)
	}
	if c.archiveAfter != 0 && c.archiveAfter < tables.MinArchiveAfter {
		fmt.Fprintf(os.Stderr, "ledgersoak: -archive-after must be 0 or at least %v\n", tables.MinArchiveAfter)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, c)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ledgersoak:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) (err error) {
	name, dbURL, err := createDB(ctx, c.server)
	if err != nil {
		return err
	}
	fmt.Printf("database %s\n", name)
	if !c.keep {
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = errors.Join(err, admin(dctx, c.server, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"))
		}()
	}

	opts := tables.Options{MaxConns: int32(c.conns)}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	tables.ConfigurePool(cfg, opts)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if pool != nil {
			pool.Close()
		}
	}()
	if err := tables.Migrate(ctx, pool); err != nil {
		return err
	}
	version, err := tables.SchemaVersion(ctx, pool)
	if err != nil {
		return err
	}
	s, stopEngine, err := startEngine(ctx, pool, opts)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopEngine()) }()
	keys, err := setup(ctx, s, c.accounts)
	if err != nil {
		return err
	}
	// A separate connection for the statistics, so reports never wait for the pool.
	statsConn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer statsConn.Close(context.Background())
	if err := printSettings(ctx, statsConn); err != nil {
		return err
	}
	fmt.Printf("schema version %d, %d pairs over %d accounts, %d callers, pool %d\n\n",
		version, c.n, c.accounts, c.callers, c.conns)

	if c.hold > 0 {
		holdCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		held := make(chan error, 1)
		go func() { held <- holdSnapshots(holdCtx, dbURL, c.hold) }()
		defer func() {
			cancel()
			if herr := <-held; herr != nil && !errors.Is(herr, context.Canceled) {
				err = errors.Join(err, fmt.Errorf("-hold: %w", herr))
			}
		}()
	}

	// stopArchive ends the archiving (before the pool closes) and reports its error.
	stopArchive := func() error { return nil }
	if c.archiveAfter > 0 {
		archCtx, cancel := context.WithCancel(ctx)
		archived := make(chan error, 1)
		go func() { archived <- archive(archCtx, s, c.archiveAfter) }()
		stopArchive = sync.OnceValue(func() error {
			cancel()
			if aerr := <-archived; aerr != nil {
				return fmt.Errorf("-archive-after: %w", aerr)
			}
			return nil
		})
		defer func() { err = errors.Join(err, stopArchive()) }()
	}

	base, err := snapshot(ctx, statsConn)
	if err != nil {
		return err
	}
	baseWAL, err := walNow(ctx, statsConn)
	if err != nil {
		return err
	}
	rep := &reporter{conn: statsConn, start: time.Now(), prev: base, base: base, maxDead: map[string]int64{},
		prevWAL: baseWAL, baseWAL: baseWAL}
	rep.prevAt = rep.start
	if c.cpuProfile != "" {
		if err := rep.startProfile(c.cpuProfile); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	var (
		next, done, failed atomic.Int64
		firstErr           error
		errOnce            sync.Once
		wg                 sync.WaitGroup
	)
	marks := make(chan time.Time, c.n/c.every+1)
	fail := func(err error) {
		failed.Add(1)
		errOnce.Do(func() { firstErr = err })
	}
	for range c.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > int64(c.n) {
					return
				}
				r, err := s.Reserve(ctx, ledger.ReserveRequest{RequestID: randomID(), KeyID: keys[int(i)%len(keys)],
					Model: "demo-chat", Amount: c.amount, Pool: ledger.PoolGeneral})
				if err == nil {
					_, err = s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: c.actual,
						Usage: ledger.Usage{InputTokens: 100, OutputTokens: 200}, UpstreamModel: "up", Channel: "c"})
				}
				if err != nil {
					fail(err)
				}
				if d := done.Add(1); d%int64(c.every) == 0 {
					marks <- time.Now()
				}
			}
		}()
	}
	go func() { wg.Wait(); close(marks) }()
	var reported int64
	for at := range marks {
		reported += int64(c.every)
		if err := rep.report(ctx, reported, at, failed.Load()); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	end := time.Now()
	total := done.Load()

	if err := stopArchive(); err != nil {
		return err
	}
	// A list waits until the derived tables hold every decision durable now.
	if _, err := s.ListAccounts(ctx, ledger.AccountQuery{Limit: 1}); err != nil {
		return fmt.Errorf("waiting for the derived tables: %w", err)
	}
	if err := stopEngine(); err != nil {
		return err
	}
	// Closing the pool ends its backends, which flush their statistics: the final
	// figures are exact.
	pool.Close()
	pool = nil
	time.Sleep(time.Second)
	if err := rep.final(ctx, total, end, failed.Load()); err != nil {
		return err
	}
	if failed.Load() > 0 {
		return fmt.Errorf("%d pairs failed, the first: %w", failed.Load(), firstErr)
	}
	if !c.noCheck {
		check, err := pgxpool.New(ctx, dbURL)
		if err != nil {
			return err
		}
		defer check.Close()
		t := time.Now()
		if err := tablestest.CheckInvariants(ctx, check); err != nil {
			return fmt.Errorf("invariants: %w", err)
		}
		fmt.Printf("invariants hold over every row (checked in %s)\n", time.Since(t).Round(time.Second))
	}
	return nil
}

// archive moves settled reservations to the archive every second until ctx ends, as
// accounting's sweeper does, and prints how many it moved in all.
func archive(ctx context.Context, s engine.Store, after time.Duration) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	total := 0
	for {
		select {
		case <-ctx.Done():
			fmt.Printf("archived %d settled reservations\n", total)
			return nil
		case <-t.C:
		}
		for range tables.ArchiveBatchesPerSweep {
			n, err := s.ArchiveSettled(ctx, after, tables.ArchiveBatch)
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				return err
			}
			total += n
			if n < tables.ArchiveBatch {
				break
			}
		}
	}
}

// setup creates the accounts, each topped up for the whole soak, and one key per
// account with daily and monthly limits (so the spend windows are kept and checked).
func setup(ctx context.Context, s engine.Store, accounts int) ([]string, error) {
	tier := ledger.Tier{Name: "soak", RPMBeforeTopUp: 1_000_000_000, RPMAfterTopUp: 1_000_000_000,
		InFlightGeneral: 1_000_000, InFlightHighCost: 1_000_000}
	if _, err := s.PutTier(ctx, tier); err != nil {
		return nil, err
	}
	limit := ledger.Micros(1 << 50)
	keys := make([]string, accounts)
	for i := range keys {
		a, err := s.CreateAccount(ctx, ledger.NewAccount{Tier: tier.Name})
		if err != nil {
			return nil, err
		}
		if _, err := s.TopUp(ctx, a.ID, 1<<50, ""); err != nil {
			return nil, err
		}
		h := sha256.Sum256([]byte(randomID()))
		k, err := s.CreateKey(ctx, ledger.NewKey{AccountID: a.ID, Name: "soak", Hash: h[:],
			DailyLimit: &limit, MonthlyLimit: &limit})
		if err != nil {
			return nil, err
		}
		keys[i] = k.ID
	}
	return keys, nil
}

// startEngine runs the journal engine on pool, with the materializer of the derived
// tables, and returns once it owns the ledger: the ledger.Store accounting would serve,
// and stop, which ends the engine and reports why it stopped (once; later calls return
// nil).
func startEngine(ctx context.Context, pool *pgxpool.Pool, opts tables.Options) (engine.Store, func() error, error) {
	engCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	j := journal.New(pool, 0)
	e := engine.New(j, engine.Options{})
	ran, materialized := make(chan error, 1), make(chan error, 1)
	materializing := false
	go func() { ran <- e.Run(engCtx) }()
	stop := sync.OnceValue(func() error {
		cancel()
		errs := []error{<-ran}
		if materializing {
			errs = append(errs, <-materialized)
		}
		for i, err := range errs {
			if errors.Is(err, context.Canceled) {
				errs[i] = nil
			}
		}
		return errors.Join(errs...)
	})
	for t0 := time.Now(); !e.Owning(); time.Sleep(5 * time.Millisecond) {
		if time.Since(t0) > 30*time.Second {
			return engine.Store{}, nil, errors.Join(fmt.Errorf("the engine does not own the ledger: %v", e.Err()), stop())
		}
	}
	materializing = true
	go func() { materialized <- e.Materialize(engCtx, j, pool, 0, zap.NewNop()) }()
	return engine.Store{Engine: e, Reports: tables.New(pool, opts)}, stop, nil
}

// holdSnapshots keeps a repeatable-read snapshot open on its own connection, starting a
// new one every d, until ctx ends.
func holdSnapshots(ctx context.Context, dbURL string, d time.Duration) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for {
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return err
		}
		var n int64
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM accounts").Scan(&n); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			_ = tx.Rollback(context.Background())
			return ctx.Err()
		case <-time.After(d):
		}
		if err := tx.Rollback(ctx); err != nil {
			return err
		}
	}
}

// randomID is a request id as the gateway makes them: 128 random bits in hex.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// tableStats is one table's line of pg_stat_user_tables with its sizes.
type tableStats struct {
	heap, indexes, total      int64
	live, dead, ins, upd, hot int64
	vacuums, analyzes         int64
}

func snapshot(ctx context.Context, conn *pgx.Conn) (map[string]tableStats, error) {
	// Statistics are cached per transaction; each snapshot reads fresh ones.
	if _, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, `
		SELECT relname::text, pg_relation_size(relid), pg_indexes_size(relid), pg_total_relation_size(relid),
		       n_live_tup, n_dead_tup, n_tup_ins, n_tup_upd, n_tup_hot_upd, autovacuum_count, autoanalyze_count
		FROM pg_stat_user_tables WHERE relname = ANY ($1)`, soakTables)
	if err != nil {
		return nil, err
	}
	out := map[string]tableStats{}
	var name string
	var t tableStats
	_, err = pgx.ForEachRow(rows, []any{&name, &t.heap, &t.indexes, &t.total, &t.live, &t.dead, &t.ins, &t.upd,
		&t.hot, &t.vacuums, &t.analyzes}, func() error {
		out[name] = t
		return nil
	})
	return out, err
}

// walStats is the server's write-ahead log so far (pg_stat_wal): bytes written and
// full-page images (a page's first change after a checkpoint logs the whole page, so
// changes scattered over many pages cost more log than the same changes at one edge).
type walStats struct{ bytes, fpi int64 }

func walNow(ctx context.Context, conn *pgx.Conn) (walStats, error) {
	var w walStats
	err := conn.QueryRow(ctx, "SELECT wal_bytes::bigint, wal_fpi FROM pg_stat_wal").Scan(&w.bytes, &w.fpi)
	return w, err
}

// perPair prints the log written between from and to over n pairs.
func (w walStats) perPair(from walStats, n int64) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f bytes and %.3f full-page images per pair", float64(w.bytes-from.bytes)/float64(n),
		float64(w.fpi-from.fpi)/float64(n))
}

type reporter struct {
	conn         *pgx.Conn
	start        time.Time
	prevAt       time.Time
	prevN        int64
	base, prev   map[string]tableStats
	prevWAL      walStats
	baseWAL      walStats
	firstRate    float64
	lastRate     float64
	maxDead      map[string]int64
	reportsTaken int
	profile      string
	profileOut   *os.File
}

func (r *reporter) report(ctx context.Context, n int64, at time.Time, failed int64) error {
	now, err := snapshot(ctx, r.conn)
	if err != nil {
		return err
	}
	rate := float64(n-r.prevN) / at.Sub(r.prevAt).Seconds()
	if r.reportsTaken == 0 {
		r.firstRate = rate
	}
	r.lastRate = rate
	r.reportsTaken++
	wal, err := walNow(ctx, r.conn)
	if err != nil {
		return err
	}
	fmt.Printf("== %d pairs, %s: %.0f pairs/s since the last report, %.0f overall; %d failed\n",
		n, at.Sub(r.start).Round(time.Second), rate, float64(n)/at.Sub(r.start).Seconds(), failed)
	fmt.Printf("write-ahead log since the last report (the whole server's): %s\n", wal.perPair(r.prevWAL, n-r.prevN))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("this process: heap %s allocated (GC goal %s), %d GCs so far, GC CPU %.1f %% of the run\n",
		mb(int64(ms.HeapAlloc)), mb(int64(ms.NextGC)), ms.NumGC, 100*ms.GCCPUFraction)
	r.table(now, r.prev)
	r.prev, r.prevAt, r.prevN, r.prevWAL = now, at, n, wal
	if r.profile != "" {
		pprof.StopCPUProfile()
		if err := r.startProfile(r.profile); err != nil {
			return err
		}
	}
	return nil
}

// startProfile starts a CPU profile of the next interval, written to path with the
// interval's number appended.
func (r *reporter) startProfile(path string) error {
	r.profile = path
	if r.profileOut != nil {
		_ = r.profileOut.Close()
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", path, r.reportsTaken+1))
	if err != nil {
		return err
	}
	r.profileOut = f
	return pprof.StartCPUProfile(f)
}

func (r *reporter) final(ctx context.Context, n int64, end time.Time, failed int64) error {
	now, err := snapshot(ctx, r.conn)
	if err != nil {
		return err
	}
	el := end.Sub(r.start)
	fmt.Printf("== done: %d pairs in %s, %.0f pairs/s overall (first report %.0f, last %.0f); %d failed\n",
		n, el.Round(time.Second), float64(n)/el.Seconds(), r.firstRate, r.lastRate, failed)
	wal, err := walNow(ctx, r.conn)
	if err != nil {
		return err
	}
	fmt.Printf("write-ahead log over the run (the whole server's): %s\n", wal.perPair(r.baseWAL, n))
	fmt.Println("whole run (HOT % over every update of the run; peak dead = the most seen at a report):")
	r.table(now, r.base)

	rows, err := r.conn.Query(ctx, `
		SELECT relname::text, indexrelname::text, pg_relation_size(indexrelid), idx_scan
		FROM pg_stat_user_indexes WHERE relname = ANY ($1) ORDER BY relname, indexrelname`, soakTables)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "table\tindex\tsize\tscans\t")
	var tbl, idx string
	var size, scans int64
	if _, err := pgx.ForEachRow(rows, []any{&tbl, &idx, &size, &scans}, func() error {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t\n", tbl, idx, mb(size), scans)
		return nil
	}); err != nil {
		return err
	}
	fmt.Println()
	return w.Flush()
}

// table prints one line per table: sizes and dead tuples now, and the updates, the HOT
// share and the autovacuum runs since prev.
func (r *reporter) table(now, prev map[string]tableStats) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "table\theap\tindexes\tlive\tdead\tpeak dead\tinserts\tupdates\tHOT %\tautovacuums\tautoanalyzes\t")
	for _, name := range soakTables {
		t, p := now[name], prev[name]
		r.maxDead[name] = max(r.maxDead[name], t.dead)
		upd, hot := t.upd-p.upd, t.hot-p.hot
		share := "-"
		if upd > 0 {
			share = fmt.Sprintf("%.1f", 100*float64(hot)/float64(upd))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t\n", name, mb(t.heap), mb(t.indexes),
			t.live, t.dead, r.maxDead[name], t.ins-p.ins, upd, share, t.vacuums-p.vacuums, t.analyzes-p.analyzes)
	}
	_ = w.Flush()
	fmt.Println()
}

func mb(b int64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%d kB", b>>10)
	}
	return fmt.Sprintf("%.1f MB", float64(b)/(1<<20))
}

// printSettings prints the server's autovacuum settings and the tables' own.
func printSettings(ctx context.Context, conn *pgx.Conn) error {
	var v, on, naptime, scale, delay string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('autovacuum'),
		current_setting('autovacuum_naptime'), current_setting('autovacuum_vacuum_scale_factor'),
		current_setting('autovacuum_vacuum_cost_delay')`).Scan(&v, &on, &naptime, &scale, &delay); err != nil {
		return err
	}
	fmt.Printf("PostgreSQL %s; server autovacuum %s: naptime %s, vacuum_scale_factor %s, vacuum_cost_delay %s\n",
		v, on, naptime, scale, delay)
	if on != "on" {
		fmt.Println("WARNING: autovacuum is off on this server (a test server's setting?): nothing below is vacuumed," +
			" unlike production; run the soak on a server with autovacuum on (-server)")
	}
	rows, err := conn.Query(ctx, `SELECT relname::text, coalesce(array_to_string(reloptions, ', '), '')
		FROM pg_class WHERE relkind = 'r' AND relname = ANY ($1)`, soakTables)
	if err != nil {
		return err
	}
	var name, opts string
	_, err = pgx.ForEachRow(rows, []any{&name, &opts}, func() error {
		if opts == "" {
			opts = "(server defaults)"
		}
		fmt.Printf("  %s: %s\n", name, opts)
		return nil
	})
	return err
}

// createDB creates a database of a fresh name on server's PostgreSQL and returns its
// name and URL.
func createDB(ctx context.Context, server string) (string, string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", "", fmt.Errorf("-server: %w", err)
	}
	name := "ledgersoak_" + randomID()[:12]
	if err := admin(ctx, server, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", fmt.Errorf("create database: %w", err)
	}
	u.Path = "/" + name
	return name, u.String(), nil
}

func admin(ctx context.Context, server, sql string) error {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}
