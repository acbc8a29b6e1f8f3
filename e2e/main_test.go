// Package e2e_test is the black-box suite: it builds the binaries, starts the whole stack
// on free loopback ports (with the Envoy test front, or real Envoy when E2E_ENVOY names a
// binary), creates accounts and keys with gatewayctl, and drives the gateway with the
// official OpenAI and Anthropic Go SDKs and raw HTTP.
package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/store/storetest"
	"github.com/llmgw/gateway/e2e/stack"
)

var gw *stack.Stack

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("E2E_SKIP") != "" {
		fmt.Println("e2e: skipped (E2E_SKIP set)")
		return m.Run()
	}
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "gateway-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bin")
	build := exec.Command("go", "build", "-o", bin+"/", "./accounting/cmd/...", "./extproc/cmd/...", "./e2e/cmd/...")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build:", err)
		return 1
	}

	dbURL, dropDB, err := freshDatabase()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: database:", err)
		return 1
	}
	defer dropDB()

	logFile, err := os.Create(filepath.Join(tmp, "stack.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := stack.Config{
		Root:                 root,
		BinDir:               bin,
		RunDir:               filepath.Join(tmp, "run"),
		GatewayAddr:          freeAddr(),
		EnvoyAdminAddr:       freeAddr(),
		ExtprocAddr:          freeAddr(),
		AccountingAddr:       freeAddr(),
		MockAddr:             freeAddr(),
		ExtprocMetricsAddr:   freeAddr(),
		AccountingMetricsAdr: freeAddr(),
		DatabaseURL:          dbURL,
		EnvoyBin:             os.Getenv("E2E_ENVOY"),
		Log:                  logFile,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gw, err = stack.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start stack:", err)
		dumpLog(logFile.Name())
		return 1
	}
	fmt.Printf("e2e: stack up at %s through the %s\n", gw.BaseURL, gw.Front)
	code := m.Run()
	gw.Stop()
	if code == 0 {
		// Whatever the tests did, the ledger they leave must be exact: balances equal
		// the sum of their ledger, every charge made once, nothing held after the stack
		// has stopped and settled.
		if err := checkLedger(dbURL); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: ledger after the suite:", err)
			code = 1
		} else {
			fmt.Println("e2e: ledger exact after the suite (invariants hold, nothing held)")
		}
	}
	if code != 0 {
		dumpLog(logFile.Name())
	}
	return code
}

func dumpLog(path string) {
	b, _ := os.ReadFile(path)
	if len(b) > 64<<10 {
		b = b[len(b)-64<<10:]
	}
	fmt.Fprintf(os.Stderr, "---- stack log (tail) ----\n%s\n", b)
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
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

// checkLedger runs the store's invariant checks on the suite's database and checks
// that no reservation is still held.
func checkLedger(dbURL string) error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := storetest.CheckInvariants(ctx, pool); err != nil {
		return err
	}
	var held int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM reservations WHERE state = 'held'").Scan(&held); err != nil {
		return err
	}
	if held != 0 {
		return fmt.Errorf("%d reservations still held after the stack stopped", held)
	}
	return nil
}

// ctl runs gatewayctl against the stack and decodes its JSON output.
func ctl(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, err := ctlRaw(args...)
	if err != nil {
		t.Fatalf("gatewayctl %s: %v", strings.Join(args, " "), err)
	}
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("gatewayctl %s: output %q: %v", strings.Join(args, " "), out, err)
	}
	return v
}

func ctlRaw(args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(gw.BinDir, "gatewayctl"), args...)
	cmd.Env = append(os.Environ(),
		"GATEWAY_ACCOUNTING_ADDR="+gw.AccountingAddr,
		"GATEWAY_ADMIN_TOKEN="+gw.AdminToken)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return out, nil
}

// micros reads an "<name>_micros" integer field of a gatewayctl object.
func micros(t *testing.T, obj map[string]any, name string) int64 {
	t.Helper()
	v, ok := obj[name+"_micros"]
	if !ok {
		t.Fatalf("no %s_micros in %v", name, obj)
	}
	n, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
	if err != nil {
		t.Fatalf("%s_micros: %v", name, err)
	}
	return n
}

// customer is an account with one key.
type customer struct {
	account string
	key     string
	keyID   string
}

type customerOpts struct {
	tier    string
	topup   string // decimal credits; empty for none
	keyArgs []string
}

func newCustomer(t *testing.T, o customerOpts) customer {
	t.Helper()
	args := []string{"account", "create"}
	if o.tier != "" {
		args = append(args, "--tier", o.tier)
	}
	acc := ctl(t, args...)
	id := fmt.Sprint(acc["id"])
	if o.topup != "" {
		ctl(t, "account", "topup", id, "--amount", o.topup)
	}
	k := ctl(t, append([]string{"key", "create", "--account", id}, o.keyArgs...)...)
	return customer{account: id, key: fmt.Sprint(k["key"]), keyID: fmt.Sprint(k["id"])}
}

func (c customer) balance(t *testing.T) int64 {
	return micros(t, ctl(t, "account", "show", c.account), "balance")
}

// waitSettled polls until the account holds no reservation: settlement happens when
// the stream ends, which can be just after the client has read the last byte.
func (c customer) waitSettled(t *testing.T) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		acc := ctl(t, "account", "show", c.account)
		if micros(t, acc, "reserved") == 0 {
			return acc
		}
		if time.Now().After(deadline) {
			t.Fatalf("reservation still held: %v", acc)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
