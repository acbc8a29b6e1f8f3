// Package harness starts a private gateway stack for a black-box test package: it
// builds the binaries, makes a fresh database, picks free loopback ports, and checks the
// ledger the tests leave behind. The e2e suite and the fault-injection suite both use it.
//
// It may import e2e/stack and the store's test helpers; nothing of the gateway's
// internals.
package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/tables/tablestest"
	"github.com/llmgw/gateway/e2e/stack"
)

// Env is a started stack and what it needs to be torn down.
type Env struct {
	Stack *stack.Stack
	// DatabaseURL is the stack's own database.
	DatabaseURL string
	// LogPath receives the stack's output.
	LogPath string
	root    string
	bin     string // the binaries, in tmp or in the Env they were built for
	tmp     string
	dropDB  func()
}

// Start builds the binaries from the repository root, creates a fresh database and
// starts the whole stack on free loopback ports (real Envoy when E2E_ENVOY names a
// binary). Every part inherits the caller's environment (less the secrets it does not
// use), so a test tunes the parts with os.Setenv before Start. Close stops it.
func Start(root string) (*Env, error) {
	tmp, err := os.MkdirTemp("", "gateway-e2e-")
	if err != nil {
		return nil, err
	}
	e := &Env{root: root, bin: filepath.Join(tmp, "bin"), tmp: tmp, dropDB: func() {}}
	// The vtprotobuf tag compiles go-control-plane's generated marshalling, which
	// extproc's server and the front's client use (internal/vtcodec), as the Makefile
	// and the Dockerfile build them.
	build := exec.Command("go", "build", "-tags", "vtprotobuf", "-o", e.bin+"/", "./accounting/cmd/...", "./extproc/cmd/...", "./console/cmd/...", "./e2e/cmd/...")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		e.Close()
		return nil, fmt.Errorf("build: %w", err)
	}
	if err := e.start(); err != nil {
		return nil, err
	}
	return e, nil
}

// Another starts one more stack of e's binaries, with a database, ports and files of
// its own: a test whose faults must not reach the other tests' stack (an outage of a
// shared part) runs on it, in parallel with them. Each of tune, when given, changes the
// stack's configuration before it starts (more accounting replicas or gateways). Close
// it when done; e must outlive it.
func (e *Env) Another(tune ...func(*stack.Config)) (*Env, error) {
	tmp, err := os.MkdirTemp("", "gateway-e2e-")
	if err != nil {
		return nil, err
	}
	a := &Env{root: e.root, bin: e.bin, tmp: tmp, dropDB: func() {}}
	if err := a.start(tune...); err != nil {
		return nil, err
	}
	return a, nil
}

// start makes e's database and starts its stack; on failure it closes e.
func (e *Env) start(tune ...func(*stack.Config)) error {
	root, tmp := e.root, e.tmp
	var err error
	if e.DatabaseURL, e.dropDB, err = freshDatabase(); err != nil {
		e.Close()
		return fmt.Errorf("database: %w", err)
	}
	e.LogPath = filepath.Join(tmp, "stack.log")
	logFile, err := os.Create(e.LogPath)
	if err != nil {
		e.Close()
		return err
	}
	// Without a chosen catalog the stack serves a working copy of the demo catalog in
	// its run directory, which tests may edit while it runs (extproc reloads it).
	mockAddr := stack.FreeAddr()
	cfg := stack.Config{
		Root:                 root,
		BinDir:               e.bin,
		RunDir:               filepath.Join(tmp, "run"),
		GatewayAddr:          stack.FreeAddr(),
		EnvoyAdminAddr:       stack.FreeAddr(),
		ExtprocAddr:          stack.FreeAddr(),
		AccountingAddr:       stack.FreeAddr(),
		MockAddr:             mockAddr,
		ExtprocMetricsAddr:   stack.FreeAddr(),
		AccountingMetricsAdr: stack.FreeAddr(),
		ConsoleAddr:          stack.FreeAddr(),
		DatabaseURL:          e.DatabaseURL,
		EnvoyBin:             os.Getenv("E2E_ENVOY"),
		Log:                  logFile,
	}
	for _, f := range tune {
		f(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if e.Stack, err = stack.Start(ctx, cfg); err != nil {
		e.DumpLog()
		e.Close()
		return fmt.Errorf("start stack: %w", err)
	}
	return nil
}

// StopStack stops the stack's parts (each drains and settles first); Close also does it.
func (e *Env) StopStack() {
	if e.Stack != nil {
		e.Stack.Stop()
		e.Stack = nil
	}
}

// Close stops the stack, drops its database and removes its files.
func (e *Env) Close() {
	e.StopStack()
	e.dropDB()
	_ = os.RemoveAll(e.tmp)
}

// DumpLog writes the tail of the stack's log to stderr.
func (e *Env) DumpLog() {
	b, _ := os.ReadFile(e.LogPath)
	if len(b) > 64<<10 {
		b = b[len(b)-64<<10:]
	}
	fmt.Fprintf(os.Stderr, "---- stack log (tail) ----\n%s\n", b)
}

// freshDatabase creates a uniquely named database on the server of DATABASE_URL (or the
// local default) and returns its URL and a function that drops it.
func freshDatabase() (string, func(), error) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("gateway_e2e_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	ctx := context.Background()
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	u := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
	drop := func() {
		c, err := pgx.ConnectConfig(context.Background(), cfg)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return u, drop, nil
}

// CheckLedger runs the store's invariant checks on the stack's database and checks that
// no reservation is still held (call it after StopStack: every part has settled).
func (e *Env) CheckLedger() error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, e.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := tablestest.CheckInvariants(ctx, pool); err != nil {
		return err
	}
	var held int
	// Every hold counts in its account's in_flight (no table keeps a row per hold since
	// migration 0023).
	if err := pool.QueryRow(ctx, "SELECT coalesce(sum(in_flight), 0) FROM accounts").Scan(&held); err != nil {
		return err
	}
	if held != 0 {
		return fmt.Errorf("%d reservations still held after the stack stopped", held)
	}
	return nil
}

// Ctl runs the stack's gatewayctl with its admin credential and returns its stdout; a
// failure carries its stderr.
func Ctl(s *stack.Stack, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.BinDir, "gatewayctl"), args...)
	cmd.Env = append(os.Environ(),
		"GATEWAY_ACCOUNTING_ADDR="+s.AccountingAddr,
		"GATEWAY_ADMIN_TOKEN="+s.AdminToken)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return out, nil
}

// Main is a black-box suite's TestMain: unless E2E_SKIP is set it starts a stack from
// the repository root at rel (relative to the test package), hands it to ready, runs
// the tests, stops the stack (every part drains and settles) and checks the ledger they
// left: balances equal the sum of their ledger, every charge made once, nothing held.
// It returns the process's exit code.
func Main(m *testing.M, name, rel string, ready func(*Env)) int {
	if os.Getenv("E2E_SKIP") != "" {
		fmt.Printf("%s: skipped (E2E_SKIP set)\n", name)
		return m.Run()
	}
	root, err := filepath.Abs(rel)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err := Start(root)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	defer env.Close()
	ready(env)
	fmt.Printf("%s: stack up at %s through the %s\n", name, env.Stack.BaseURL, env.Stack.Front)
	code := m.Run()
	env.StopStack()
	if code == 0 {
		if err := env.CheckLedger(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: ledger after the suite: %v\n", name, err)
			code = 1
		} else {
			fmt.Printf("%s: ledger exact after the suite (invariants hold, nothing held)\n", name)
		}
	}
	if code != 0 {
		env.DumpLog()
	}
	return code
}
