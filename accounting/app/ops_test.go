package app_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/app"
	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/tables"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestMigrateOnly: with only a database URL (no tokens) Main creates the database,
// applies every migration, exits 0, and does it again idempotently.
func TestMigrateOnly(t *testing.T) {
	t.Setenv("GATEWAY_SERVICE_TOKEN", "")
	t.Setenv("GATEWAY_ADMIN_TOKEN", "")
	db := tablestest.EmptyDB(t)
	t.Setenv("DATABASE_URL", db)
	for i := range 2 {
		var errb bytes.Buffer
		if code := app.Main(context.Background(), []string{"--migrate-only"}, &errb); code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errb.String())
		}
	}
	files, err := tables.MigrationFiles()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v int
	if err := conn.QueryRow(context.Background(), "SELECT version FROM public.ledger_schema_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != len(files) {
		t.Errorf("schema version %d, want %d", v, len(files))
	}
}

func TestMigrateOnlyFailsWithoutDatabase(t *testing.T) {
	var errb bytes.Buffer
	code := app.Main(context.Background(), []string{"--migrate-only", "--database-url", "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"}, &errb)
	if code != 1 {
		t.Errorf("exit %d, want 1: %s", code, errb.String())
	}
}

// TestTokenRotation: two service tokens are accepted at once (file, one per line) and
// two admin tokens (environment, comma-separated); a retired one is not.
func TestTokenRotation(t *testing.T) {
	const (
		svcOld = "svc-token-old-for-app-tests-0123"
		svcNew = "svc-token-new-for-app-tests-0123"
		admNew = "adm-token-new-for-app-tests-0123"
	)
	dir := t.TempDir()
	svcFile := filepath.Join(dir, "service-token")
	if err := os.WriteFile(svcFile, []byte(svcOld+"\n"+svcNew+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GATEWAY_ADMIN_TOKEN", adminToken+","+admNew)
	p := start(t, tablestest.NewDB(t), "--service-token-file", svcFile, "--admin-token-file", "")
	ctx := context.Background()
	for _, tc := range []struct {
		name, token string
		want        codes.Code
	}{
		{"old service token", svcOld, codes.NotFound},
		{"new service token", svcNew, codes.NotFound},
		{"new admin token", admNew, codes.NotFound},
		{"retired service token", serviceToken, codes.Unauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := client.Dial(ctx, p.addr, tc.token)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = accountingv1.NewLedgerServiceClient(conn).GetVideoTask(ctx, &accountingv1.GetVideoTaskRequest{TaskId: "task-none"})
			if status.Code(err) != tc.want {
				t.Errorf("GetVideoTask = %v, want %v", err, tc.want)
			}
		})
	}
	_, err := accountingv1.NewAdminServiceClient(dialT(t, p.addr, admNew)).GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: "00000000-0000-0000-0000-000000000000"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("admin call with the new admin token: %v", err)
	}
	if logs := p.logs.String(); strings.Contains(logs, svcNew) || strings.Contains(logs, admNew) {
		t.Error("a token reached the logs")
	}

	// The calls above are on /metrics, by method and code.
	body := get(t, "http://"+p.metricsAddr+"/metrics")
	for _, want := range []string{
		`accounting_grpc_request_duration_seconds_count{code="NotFound",method="GetVideoTask"} 3`,
		`accounting_grpc_request_duration_seconds_count{code="Unauthenticated",method="GetVideoTask"} 1`,
		`accounting_grpc_request_duration_seconds_count{code="NotFound",method="GetAccount"} 1`,
		"accounting_reservations_expired_total 0",
		"accounting_ledger_group_operations_total 0",
		"accounting_ledger_group_transactions_total 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grep(body, "accounting_"))
		}
	}
}

func dialT(t *testing.T, addr, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := client.Dial(context.Background(), addr, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s = %d", u, resp.StatusCode)
	}
	return string(b)
}

func grep(text, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestPprofOnTheMetricsListener: --pprof (or ACCOUNTING_PPROF) puts the runtime profiles
// next to /metrics; TestEndToEndThroughMain checks they are off without it.
func TestPprofOnTheMetricsListener(t *testing.T) {
	p := start(t, tablestest.NewDB(t), "--pprof")
	if body := get(t, "http://"+p.metricsAddr+"/debug/pprof/goroutine?debug=1"); !strings.Contains(body, "goroutine") {
		t.Errorf("goroutine profile = %.200s", body)
	}
	get(t, "http://"+p.metricsAddr+"/metrics")
}
