// Package tablestest gives tests a fresh, migrated PostgreSQL database of their own and
// checks the ledger's invariants in it. It needs a PostgreSQL server: the one in
// LEDGER_TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres.
//
// The first database of a test binary is migrated into a template; every later one
// is a copy of it (CREATE DATABASE … TEMPLATE), which is much faster than migrating.
// Each database is dropped when its test ends, and the template when the package's tests
// end: run them through Main.
package tablestest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables"
)

// EnvURL names the environment variable with the server URL tests use.
const EnvURL = "LEDGER_TEST_DATABASE_URL"

const defaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// ServerURL returns the URL of the server's maintenance database tests connect to.
func ServerURL() string {
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	return defaultURL
}

// NewDB creates a fresh database with the ledger's schema for t, drops it when t ends
// (terminating connections still open), and returns its URL.
func NewDB(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	templateOnce.Do(func() { templateName, templateErr = makeTemplate(ctx) })
	if templateErr != nil {
		t.Fatalf("tablestest: template database: %v", templateErr)
	}
	name := dbName(t.Name())
	if err := admin(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{templateName}.Sanitize())); err != nil {
		t.Fatalf("tablestest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dropDB(ctx, name); err != nil {
			t.Errorf("tablestest: drop database %s: %v", name, err)
		}
	})
	return urlFor(name)
}

// EmptyDB returns the URL of a database that does not exist yet, under a unique name,
// and drops it when t ends if something created it (tests of EnsureDatabase and
// Migrate).
func EmptyDB(t testing.TB) string {
	t.Helper()
	name := dbName(t.Name())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dropDB(ctx, name); err != nil {
			t.Errorf("tablestest: drop database %s: %v", name, err)
		}
	})
	return urlFor(name)
}

// NewPool opens a pgx pool of at most maxConns connections on url, closed when t ends,
// with the per-connection timeouts a Store with default Options sets.
func NewPool(t testing.TB, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	return NewPoolWith(t, url, tables.Options{MaxConns: maxConns})
}

// NewPoolWith opens a pgx pool on url configured by tables.ConfigurePool(opts) and then
// by each of configure (a test's tracer, say), closed when t ends.
func NewPoolWith(t testing.TB, url string, opts tables.Options, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("tablestest: %v", err)
	}
	tables.ConfigurePool(cfg, opts)
	for _, c := range configure {
		c(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("tablestest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Main runs a package's tests and then drops the template database: a test package
// that uses PostgreSQL has func TestMain(m *testing.M) { tablestest.Main(m) }.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit: it runs the tests, drops the template database and
// returns the exit code, for a TestMain with cleanup of its own after the tests.
func Run(m *testing.M) int {
	code := m.Run()
	dropTemplate()
	return code
}

func dropTemplate() {
	if templateName == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = admin(ctx, "ALTER DATABASE "+pgx.Identifier{templateName}.Sanitize()+" IS_TEMPLATE false")
	_ = dropDB(ctx, templateName)
}

func makeTemplate(ctx context.Context) (string, error) {
	name := dbName("template")
	if err := admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, urlFor(name))
	if err != nil {
		return "", err
	}
	err = tables.Migrate(ctx, pool)
	pool.Close()
	if err != nil {
		_ = dropDB(ctx, name)
		return "", err
	}
	return name, nil
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// dbName makes a unique database name from a test name (at most 63 bytes).
func dbName(testName string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	base := unsafeChars.ReplaceAllString(strings.ToLower(testName), "_")
	if len(base) > 40 {
		base = base[:40]
	}
	return "ledgertest_" + base + "_" + hex.EncodeToString(b[:])
}

// urlFor returns ServerURL with its database replaced by name (URL form only).
func urlFor(name string) string {
	u, err := url.Parse(ServerURL())
	if err != nil {
		return ""
	}
	u.Path = "/" + name
	return u.String()
}

func admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func dropDB(ctx context.Context, name string) error {
	return admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

// CheckInvariants verifies, for every account in the database behind pool, what the
// ledger promises at rest and at every commit:
//   - balance = sum of the account's ledger entries, and balance >= reserved >= 0;
//   - reserved, in_flight and in_flight_high_cost = the sum, count and high-cost
//     count of its held reservations;
//   - each reservation was charged at most once, and only if committed, by exactly
//     its charged amount, and every charge names a reservation; a reservation is in
//     reservations or in reservations_archive (migration 0010), never in both;
//   - every key spend window's held and committed = the held amounts and the charges
//     of the key's reservations created in that window;
//   - the usage rollup holds, per account, UTC day, key, model (and project), exactly the count,
//     tokens and charges of the ledger's charge entries.
//
// A reservation is a row of reservations or reservations_archive (written before
// migration 0023) or a hold of the journal (JournalReservations; CheckInvariantsOf: of
// the events given).
//
// It returns one error listing every violation.
//
// The tables and the journal are read in one snapshot, and only the journal's records
// the tables hold count, so the check may run while the ledger takes requests.
func CheckInvariants(ctx context.Context, pool *pgxpool.Pool) error {
	return checkInvariants(ctx, pool, func(tx pgx.Tx) ([]Reservation, error) { return materializedReservations(ctx, tx) })
}

// CheckInvariantsOf is CheckInvariants for tables materialized from events that are in
// no journal: the reservations are those of events.
func CheckInvariantsOf(ctx context.Context, pool *pgxpool.Pool, events []machine.Event) error {
	return checkInvariants(ctx, pool, func(pgx.Tx) ([]Reservation, error) { return ReservationsOf(events), nil })
}

func checkInvariants(ctx context.Context, pool *pgxpool.Pool, reservations func(pgx.Tx) ([]Reservation, error)) error {
	// Repeatable read: every statement sees the one snapshot. Not read only: the holds
	// go into a temporary table, dropped with the transaction.
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return fmt.Errorf("invariants: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // nothing to keep
	holds, err := reservations(tx)
	if err != nil {
		return fmt.Errorf("invariants: %w", err)
	}
	if err := loadHolds(ctx, tx, holds); err != nil {
		return fmt.Errorf("invariants: %w", err)
	}
	// Every reservation, wherever it is (a database older than migration 0010 has no
	// archive).
	var hasArchive bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('reservations_archive') IS NOT NULL`).Scan(&hasArchive); err != nil {
		return fmt.Errorf("invariants: %w", err)
	}
	const cols = `id, account_id, key_id, amount, pool, state, charged, created_at`
	all := `(SELECT ` + cols + ` FROM reservations UNION ALL SELECT id::uuid, account_id::uuid, key_id::uuid, amount,
		pool, state, charged, created_at FROM journal_reservations`
	if hasArchive {
		all += ` UNION ALL SELECT ` + cols + ` FROM reservations_archive`
	}
	all += `)`
	// The rollup is per project from migration 0018 on.
	var hasProjects bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_name = 'usage_daily' AND column_name = 'project_id')`).Scan(&hasProjects); err != nil {
		return fmt.Errorf("invariants: %w", err)
	}
	entryProject, sameProject := `''`, ``
	if hasProjects {
		entryProject, sameProject = `coalesce(project_id::text, '')`, ` AND e.project_id = u.project_id`
	}
	checks := []struct{ name, sql string }{
		{"balance differs from the sum of the ledger", `
			SELECT a.id::text FROM accounts a
			WHERE a.balance <> (SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e WHERE e.account_id = a.id)
			   OR a.balance < a.reserved OR a.reserved < 0`},
		{"reserved or pools differ from the held reservations", `
			SELECT a.id::text FROM accounts a
			LEFT JOIN (SELECT account_id, sum(amount) AS amount, count(*) AS n,
			                  count(*) FILTER (WHERE pool = 2) AS nh
			           FROM ` + all + ` r WHERE state = 'held' GROUP BY account_id) h ON h.account_id = a.id
			WHERE a.reserved <> coalesce(h.amount, 0) OR a.in_flight <> coalesce(h.n, 0)
			   OR a.in_flight_high_cost <> coalesce(h.nh, 0)`},
		{"reservation charged other than once by its charge", `
			SELECT r.id::text FROM ` + all + ` r
			LEFT JOIN ledger_entries e ON e.reservation_id = r.id
			WHERE (r.state = 'committed') <> (e.id IS NOT NULL)
			   OR (e.id IS NOT NULL AND (-e.amount <> r.charged OR e.account_id <> r.account_id))`},
		{"key spend window differs from its reservations", `
			WITH w AS (
				SELECT key_id, 'd' AS period, (created_at AT TIME ZONE 'UTC')::date AS start, amount, charged, state
				FROM ` + all + ` d WHERE amount > 0
				UNION ALL
				SELECT key_id, 'm', date_trunc('month', created_at AT TIME ZONE 'UTC')::date, amount, charged, state
				FROM ` + all + ` m WHERE amount > 0),
			agg AS (
				SELECT key_id, period, start,
				       sum(amount) FILTER (WHERE state = 'held') AS held,
				       sum(charged) AS committed
				FROM w GROUP BY key_id, period, start)
			SELECT coalesce(s.key_id, agg.key_id)::text || ' ' || coalesce(s.period, agg.period)
			FROM key_spend s
			FULL JOIN agg ON agg.key_id = s.key_id AND agg.period = s.period AND agg.start = s.period_start
			WHERE coalesce(s.held, 0) <> coalesce(agg.held, 0)
			   OR coalesce(s.committed, 0) <> coalesce(agg.committed, 0)`},
		{"reservation charged twice", `
			SELECT reservation_id::text FROM ledger_entries WHERE kind = 'charge'
			GROUP BY reservation_id HAVING count(*) > 1`},
		{"charge without its reservation", `
			SELECT e.id::text FROM ledger_entries e
			WHERE e.kind = 'charge' AND NOT EXISTS (SELECT 1 FROM ` + all + ` r WHERE r.id = e.reservation_id)`},
		{"reservation in both reservations and the archive", `
			SELECT id::text FROM ` + all + ` r GROUP BY id HAVING count(*) > 1`},
		{"usage rollup differs from the ledger's charges", `
			WITH c AS (
				SELECT e.*, (SELECT coalesce(sum((x ->> 'units')::bigint), 0) FROM jsonb_array_elements(coalesce(e.components, '[]')) x
				             WHERE x ->> 'name' = 'cache_read') AS cache_read,
				       (SELECT coalesce(sum((x ->> 'units')::bigint), 0) FROM jsonb_array_elements(coalesce(e.components, '[]')) x
				             WHERE x ->> 'name' IN ('cache_write', 'cache_write_1h')) AS cache_write
				FROM ledger_entries e WHERE e.kind = 'charge'),
			e AS (
				SELECT account_id, (created_at AT TIME ZONE 'UTC')::date AS day, key_id, coalesce(model, '') AS model,
				       coalesce(channel, '') AS channel, coalesce(upstream_model, '') AS upstream_model,
				       ` + entryProject + ` AS project_id, count(*) AS requests, sum(coalesce(input_tokens, 0)) AS input_tokens,
				       sum(coalesce(output_tokens, 0)) AS output_tokens, sum(cache_read) AS cache_read,
				       sum(cache_write) AS cache_write, -sum(amount) AS charged
				FROM c GROUP BY 1, 2, 3, 4, 5, 6, 7)
			SELECT coalesce(u.account_id, e.account_id)::text || ' ' || coalesce(u.day, e.day)::text
			FROM usage_daily u
			FULL JOIN e ON e.account_id = u.account_id AND e.day = u.day AND e.key_id = u.key_id AND e.model = u.model
				AND e.channel = u.channel AND e.upstream_model = u.upstream_model` + sameProject + `
			WHERE u.account_id IS NULL OR e.account_id IS NULL OR u.requests <> e.requests
			   OR u.input_tokens <> e.input_tokens OR u.output_tokens <> e.output_tokens OR u.charged <> e.charged
			   OR u.cache_read_tokens <> e.cache_read OR u.cache_write_tokens <> e.cache_write`},
	}
	var errs []error
	for _, c := range checks {
		rows, err := tx.Query(ctx, c.sql)
		if err != nil {
			return fmt.Errorf("invariant %q: %w", c.name, err)
		}
		bad, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("invariant %q: %w", c.name, err)
		}
		if len(bad) > 0 {
			errs = append(errs, fmt.Errorf("%s: %v", c.name, bad))
		}
	}
	return errors.Join(errs...)
}

// BulkTier has limits large enough that no benchmark's load meets them.
var BulkTier = ledger.Tier{Name: "bulk", RPMBeforeTopUp: 1_000_000, RPMAfterTopUp: 1_000_000,
	InFlightGeneral: 1_000_000, InFlightHighCost: 1_000_000}

// BenchKeys makes n accounts on BulkTier (put first) with ample credits and one key
// each, whose daily and monthly limits are limit (nil: none), through s, and returns the
// keys: what a reserve+commit benchmark of any ledger.Store needs.
func BenchKeys(tb testing.TB, s ledger.Store, n int, limit *ledger.Micros) []string {
	tb.Helper()
	ctx := context.Background()
	if _, err := s.PutTier(ctx, BulkTier); err != nil {
		tb.Fatal(err)
	}
	keys := make([]string, n)
	for i := range keys {
		a, err := s.CreateAccount(ctx, ledger.NewAccount{Tier: BulkTier.Name})
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := s.TopUp(ctx, a.ID, 1<<50, ""); err != nil {
			tb.Fatal(err)
		}
		h := sha256.Sum256(fmt.Appendf(nil, "bench-%d", i))
		k, err := s.CreateKey(ctx, ledger.NewKey{AccountID: a.ID, Hash: h[:], DailyLimit: limit, MonthlyLimit: limit})
		if err != nil {
			tb.Fatal(err)
		}
		keys[i] = k.ID
	}
	return keys
}
