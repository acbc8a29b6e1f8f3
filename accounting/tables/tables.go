// Package tables is the ledger's tables in PostgreSQL: their embedded schema migrations
// and the helper that creates the database when it is missing, the reports read from
// them (accounts, keys, usage, statements, reconciliation), the change feed of keys and
// accounts, and the archive of settled reservations.
//
// The tables are derived data: the journal engine (accounting/engine) decides every
// hold and charge and its materializer writes them here; nothing in this package
// decides or writes a decision. Usage reports read usage_daily, a rollup per account,
// UTC day, key and model that a trigger on ledger_entries keeps in the materializer's
// transaction; the ledger itself is never scanned for a usage report.
//
// It returns ledger domain values and errors only: missing rows are ledger.ErrNotFound,
// bad arguments *ledger.Refusal, and any other failure an *Error that carries the
// SQLSTATE but no SQL text.
package tables

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ChangesChannel is the PostgreSQL NOTIFY channel of key and account changes.
const ChangesChannel = "ledger_changes"

// Options tune a Store. The zero value is ready to use.
type Options struct {
	// Now is the clock for every time-dependent decision (windows, expiry). Nil means
	// the database's clock, which is the same for every process on the database; tests
	// set it to control windows and expiry.
	Now func() time.Time
	// ReconnectMin and ReconnectMax bound the backoff between attempts to re-open the
	// Changes connection (defaults 100ms and 5s).
	ReconnectMin, ReconnectMax time.Duration

	// MaxConns sizes the pool Open makes (default DefaultMaxConns(); a pool_max_conns in
	// the URL is kept when MaxConns is zero).
	MaxConns int32
	// LockTimeout bounds each statement's wait for a row lock (PostgreSQL's
	// lock_timeout; default DefaultLockTimeout).
	LockTimeout time.Duration
	// StatementTimeout bounds each statement (default DefaultStatementTimeout); the
	// migrations run without it.
	StatementTimeout time.Duration
}

// Defaults of the Options that bound database waits.
const (
	DefaultLockTimeout      = 500 * time.Millisecond
	DefaultStatementTimeout = 5 * time.Second
)

// DefaultMaxConns is the pool size when none is configured: four connections per core,
// at least 8 and at most 32 (several replicas share PostgreSQL's default
// max_connections of 100).
func DefaultMaxConns() int32 {
	return int32(min(32, max(8, 4*runtime.NumCPU())))
}

func (o *Options) defaults() {
	if o.ReconnectMin <= 0 {
		o.ReconnectMin = 100 * time.Millisecond
	}
	if o.ReconnectMax < o.ReconnectMin {
		o.ReconnectMax = max(5*time.Second, o.ReconnectMin)
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = DefaultStatementTimeout
	}
}

// ConfigurePool applies opts' pool size and per-connection lock_timeout and
// statement_timeout to cfg (Open does this; tests that build their own pool call it).
func ConfigurePool(cfg *pgxpool.Config, opts Options) {
	opts.defaults()
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(cfg.ConnString(), "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns()
	}
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = strconv.FormatInt(opts.LockTimeout.Milliseconds(), 10)
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(opts.StatementTimeout.Milliseconds(), 10)
}

// Store reads the tables on a pgx pool. It is safe for concurrent use; it does not own
// the pool unless it was made by Open.
type Store struct {
	pool     *pgxpool.Pool
	opts     Options
	ownsPool bool
}

// New returns a Store on pool, whose database must already be migrated (see Migrate).
func New(pool *pgxpool.Pool, opts Options) *Store {
	opts.defaults()
	return &Store{pool: pool, opts: opts}
}

// Open connects to the database at url, applies the migrations and returns a Store
// that owns its pool (Close closes it). It does not create the database; see
// EnsureDatabase.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("ledger store: invalid database url: %w", err)
	}
	ConfigurePool(cfg, opts)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, dbError("open", err)
	}
	if err := Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	s := New(pool, opts)
	s.ownsPool = true
	return s, nil
}

// Close closes the pool when the Store owns it (made by Open).
func (s *Store) Close() {
	if s.ownsPool {
		s.pool.Close()
	}
}

// now returns the injected time, or nil for the database's clock. SQL reads a nil
// time as coalesce(NULL, now()).
func (s *Store) now() *time.Time {
	if s.opts.Now == nil {
		return nil
	}
	t := s.opts.Now()
	return &t
}

// Pool is the connection pool, shared with the journal engine's parts.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
