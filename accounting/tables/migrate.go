package tables

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// versionTable records which migrations were applied.
const versionTable = "public.ledger_schema_version"

// Migrate applies the embedded migrations (migrations/NNNN_*.sql, in order) that the
// database does not have yet. Concurrent runs take turns on an advisory lock
// (lockMigrations), so several processes may start at once.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return MigrateTo(ctx, pool, 0)
}

// MigrateTo is Migrate up to and including migration number version (0: every one). A
// database already at or past version is left as it is: migrations are never undone. It
// lets a measurement compare the schema before and after a migration.
//
// The migrations run on a connection of their own, made with the pool's settings but
// without its lock and statement timeouts (ConfigurePool): a migration may wait for a
// lock and run for as long as it needs. (On a connection of the pool, lifting them with
// SET would not last: tern resets the session after each migration, RESET ALL, which
// brings back the values the connection was opened with.)
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int) error {
	cfg := pool.Config().ConnConfig.Copy()
	delete(cfg.RuntimeParams, "lock_timeout")
	delete(cfg.RuntimeParams, "statement_timeout")
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return dbError("migrate", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if err := lockMigrations(ctx, conn); err != nil {
		return err
	}
	// Closing the connection would release the lock too; unlocking first lets the next
	// migrator in without waiting for the close.
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock) }()
	return migrateConn(ctx, conn, version)
}

// migrationLock is the advisory lock that lets one process at a time migrate (an
// arbitrary number of our own).
const migrationLock = int64(0x6c65646765720001)

// lockMigrations takes migrationLock, trying again every 50 ms while another process
// holds it. tern takes a lock of its own too, but waits for it inside a statement, and a
// session waiting in a statement holds a snapshot: CREATE INDEX CONCURRENTLY (0007) waits
// for every transaction with an older snapshot to end, so the migrator building the index
// and one waiting for its lock would wait for each other until PostgreSQL's deadlock
// check failed one of them. Between tries a waiting session holds nothing, and once it
// has this lock, tern's is free.
func lockMigrations(ctx context.Context, conn *pgx.Conn) error {
	for {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", migrationLock).Scan(&ok); err != nil {
			return dbError("migrate: lock", err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ledger store: migrate: waiting for another process's migration: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func migrateConn(ctx context.Context, conn *pgx.Conn, version int) error {
	m, err := migrate.NewMigrator(ctx, conn, versionTable)
	if err != nil {
		return fmt.Errorf("ledger store: migrate: %w", err)
	}
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("ledger store: migrate: %w", err)
	}
	if err := m.LoadMigrations(sub); err != nil {
		return fmt.Errorf("ledger store: migrate: loading migrations: %w", err)
	}
	if version == 0 {
		err = m.Migrate(ctx)
	} else if version < 0 || version > len(m.Migrations) {
		return fmt.Errorf("ledger store: migrate: no migration %d (there are %d)", version, len(m.Migrations))
	} else {
		var at int32
		if at, err = m.GetCurrentVersion(ctx); err == nil && int(at) < version {
			err = m.MigrateTo(ctx, int32(version))
		}
	}
	if err != nil {
		return fmt.Errorf("ledger store: migrate: %w", err)
	}
	return nil
}

// SchemaVersion returns the number of the last migration applied to the database.
func SchemaVersion(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var v int32
	err := pool.QueryRow(ctx, "SELECT version FROM "+versionTable).Scan(&v)
	if err != nil {
		return 0, dbError("schema version", err)
	}
	return int(v), nil
}

// EnsureDatabase creates the database named in url when it does not exist, connecting
// with the same credentials to the server's "postgres" database to do so. It is safe
// to call from several processes at once.
func EnsureDatabase(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("ledger store: invalid database url: %w", err)
	}
	name := cfg.Database
	if name == "" {
		return errors.New("ledger store: the database url names no database")
	}
	if conn, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		return conn.Close(ctx)
	} else if !isCode(err, "3D000") { // invalid_catalog_name: the database is missing
		return dbError("connect", err)
	}

	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return dbError("connect to the postgres database", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	// duplicate_database, or a unique violation on pg_database when two creations race:
	// another process created it.
	if err != nil && !isCode(err, "42P04") && !isCode(err, sqlUniqueViolation) {
		return dbError("create database", err)
	}
	return nil
}

func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// MigrationFiles lists the embedded migration files, in order.
func MigrationFiles() ([]string, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	return migrate.FindMigrations(sub)
}
