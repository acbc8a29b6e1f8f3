// Package store is the ledger's PostgreSQL store: a pgx/v5 implementation of
// ledger.Store, its embedded schema migrations, and the helper that creates the
// database when it is missing.
//
// Every decision that involves a limit (credits, key spend windows, in-flight pools,
// requests per minute) is made inside PostgreSQL, in a transaction that holds the
// account row's lock, by a PL/pgSQL function defined in migrations/. So each decision
// is atomic for any number of processes sharing the database. The lock order and the
// reasoning behind it are written at the top of migrations/0001_init.sql.
//
// Reserve, Commit and Release are group-committed (batch.go): one writer decides every
// operation queued meanwhile in one statement and one transaction, each operation as it
// would be decided alone; an operation the batch cannot take runs alone, in one
// statement of its own.
//
// Usage reports read usage_daily, a rollup per account, UTC day, key and model that a
// trigger on ledger_entries updates in the same transaction as each charge (so inside
// ledger_commit, under the account's lock); the ledger itself is never scanned for a
// report. Tier limits are read by ledger_reserve from the tiers table, so a tier
// change applies to the next reservation; key changes reach caches through Changes.
//
// Held reservations count against an account until they are committed, released or
// expired by ExpireDue (the sweeper); Reserve does not expire past-due holds itself,
// so a crashed gateway's holds are freed by the next sweep, not by the next request.
//
// The store is the only package that imports pgx. It returns ledger domain values and
// errors only: missing rows are ledger.ErrNotFound, refusals *ledger.Refusal, and any
// other failure an *Error that carries the SQLSTATE but no SQL text.
package store

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/ledger"
)

// DefaultTTL is a reservation's lifetime when ReserveRequest.TTL is zero.
const DefaultTTL = 10 * time.Minute

// ChangesChannel is the PostgreSQL NOTIFY channel of key and account changes.
const ChangesChannel = "ledger_changes"

// Options tune a Store. The zero value is ready to use.
type Options struct {
	// Now is the clock for every time-dependent decision (windows, expiry). Nil means
	// the database's clock, which is the same for every process on the database; tests
	// set it to control windows and expiry.
	Now func() time.Time
	// DefaultTTL replaces the package's DefaultTTL when positive.
	DefaultTTL time.Duration
	// ReconnectMin and ReconnectMax bound the backoff between attempts to re-open the
	// Changes connection (defaults 100ms and 5s).
	ReconnectMin, ReconnectMax time.Duration

	// MaxConns sizes the pool Open makes (default DefaultMaxConns(); a pool_max_conns in
	// the URL is kept when MaxConns is zero).
	MaxConns int32
	// LockTimeout bounds each statement's wait for a row lock, and a call's wait for its
	// account's share of connections (default DefaultLockTimeout). Both waits also end
	// before the caller's deadline would (deadline.go). A call that gives up fails with
	// ledger.ErrBusy (Reserve: a concurrency refusal) and changes nothing.
	LockTimeout time.Duration
	// StatementTimeout bounds each statement (default DefaultStatementTimeout); the
	// migrations run without it.
	StatementTimeout time.Duration
	// AccountConcurrency is how many statements of one account may use connections at
	// once (default DefaultAccountConcurrency); the rest wait in the process, so one
	// account's contention cannot take the pool from the others.
	AccountConcurrency int

	// MaxBatch caps how many Reserve, Commit and Release operations one group-commit
	// transaction decides (default DefaultMaxBatch; see batch.go).
	MaxBatch int
	// LoneBatch is the largest batch the writer runs as its operations' PL/pgSQL
	// functions, one after another in one transaction and one round trip (default
	// DefaultLoneBatch); a larger batch is decided in Go and written set-based. 1: only a
	// batch of one.
	LoneBatch int
	// NoGroupCommit runs every Reserve, Commit and Release in a transaction of its own.
	NoGroupCommit bool
}

// Defaults of the Options that bound database waits.
const (
	DefaultLockTimeout        = 500 * time.Millisecond
	DefaultStatementTimeout   = 5 * time.Second
	DefaultAccountConcurrency = 2
)

// DefaultMaxConns is the pool size when none is configured: four connections per core,
// at least 8 and at most 32 (several replicas share PostgreSQL's default
// max_connections of 100).
func DefaultMaxConns() int32 {
	return int32(min(32, max(8, 4*runtime.NumCPU())))
}

func (o *Options) defaults() {
	if o.DefaultTTL <= 0 {
		o.DefaultTTL = DefaultTTL
	}
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
	if o.AccountConcurrency <= 0 {
		o.AccountConcurrency = DefaultAccountConcurrency
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.LoneBatch <= 0 {
		o.LoneBatch = DefaultLoneBatch
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

// Store implements ledger.Store on a pgx pool. It is safe for concurrent use; it does
// not own the pool unless it was made by Open.
type Store struct {
	pool     *pgxpool.Pool
	opts     Options
	ownsPool bool

	gate                 *accountGate
	keyOwners, resOwners owners
	batch                *batcher // nil when Options.NoGroupCommit
	writerLockWait       string   // a batch's lock wait in the writer (lone.go)
}

var _ ledger.Store = (*Store)(nil)

// New returns a Store on pool, whose database must already be migrated (see Migrate).
func New(pool *pgxpool.Pool, opts Options) *Store {
	opts.defaults()
	s := &Store{pool: pool, opts: opts, gate: newAccountGate(opts.AccountConcurrency, opts.LockTimeout),
		writerLockWait: writerLockWait}
	if !opts.NoGroupCommit {
		s.batch = &batcher{s: s, max: opts.MaxBatch, lone: opts.LoneBatch}
	}
	return s
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

// Pool is the store's connection pool, shared with the journal engine's parts.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
