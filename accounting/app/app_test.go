package app_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/app"
	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/ctl"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	"github.com/llmgw/gateway/internal/logging/logtest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

func TestMain(m *testing.M) { tablestest.Main(m) }

const (
	serviceToken = "svc-token-for-app-tests-0123456789"
	adminToken   = "adm-token-for-app-tests-0123456789"
)

// syncBuffer collects a process's logs while the test reads them.
type syncBuffer = logtest.Buffer

// process is a running Main.
type process struct {
	addr, metricsAddr string
	logs              *syncBuffer
	stop              func() int
}

// start runs Main on a fresh database with ephemeral ports and waits for its
// "accounting listening" line.
func start(t testing.TB, dbURL string, extra ...string) *process {
	t.Helper()
	dir := t.TempDir()
	svc, adm := filepath.Join(dir, "service-token"), filepath.Join(dir, "admin-token")
	if err := os.WriteFile(svc, []byte(serviceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(adm, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--database-url", dbURL, "--service-token-file", svc, "--admin-token-file", adm}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- app.Main(ctx, args, logs) }()
	p := &process{logs: logs}
	var once sync.Once
	code := 0
	p.stop = func() int {
		once.Do(func() { cancel(); code = <-done })
		return code
	}
	t.Cleanup(func() { p.stop() })

	deadline := time.Now().Add(60 * time.Second)
	for p.addr == "" {
		select {
		case c := <-done:
			t.Fatalf("Main exited with %d before listening:\n%s", c, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listening line:\n%s", logs.String())
		}
		for _, line := range strings.Split(logs.String(), "\n") {
			var entry struct {
				Msg         string `json:"msg"`
				Addr        string `json:"addr"`
				MetricsAddr string `json:"metrics_addr"`
			}
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "accounting listening" {
				p.addr, p.metricsAddr = entry.Addr, entry.MetricsAddr
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return p
}

func runCtl(t *testing.T, addr string, args ...string) map[string]any {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": adminToken, "GATEWAY_ACCOUNTING_ADDR": addr}
	if code := ctl.Run(context.Background(), args, &out, &errb, func(k string) string { return env[k] }); code != 0 {
		t.Fatalf("gatewayctl %v: exit %d: %s", args, code, errb.String())
	}
	dec := json.NewDecoder(&out)
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func num(t *testing.T, m map[string]any, k string) string {
	t.Helper()
	n, ok := m[k].(json.Number)
	if !ok {
		t.Fatalf("%s = %#v, not a number", k, m[k])
	}
	return n.String()
}

// TestEndToEndThroughMain runs the real binary's library on a database it creates
// itself, and walks an account through top-up, key, authentication, reservation and
// commit over real gRPC, then shuts it down cleanly.
func TestEndToEndThroughMain(t *testing.T) {
	db := tablestest.EmptyDB(t)
	p := start(t, db)
	ctx := context.Background()

	acct := runCtl(t, p.addr, "account", "create", "--tier", "enterprise")
	id := acct["id"].(string)
	runCtl(t, p.addr, "account", "topup", id, "--amount", "10")
	key := runCtl(t, p.addr, "key", "create", "--account", id, "--name", "e2e", "--daily-limit", "1")
	secret := key["key"].(string)

	conn, err := client.Dial(ctx, p.addr, serviceToken)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	led := accountingv1.NewLedgerServiceClient(conn)
	hash := sha256.Sum256([]byte(secret))
	auth, err := led.Authenticate(ctx, &accountingv1.AuthenticateRequest{KeyHash: hash[:]})
	if err != nil {
		t.Fatal(err)
	}
	g := auth.GetGrant()
	if g.GetKeyId() != key["id"] || g.GetAccountId() != id || g.GetTier() != "enterprise" || !g.GetAccountToppedUp() || g.GetDailyLimitMicros() != 1_000_000 {
		t.Fatalf("grant = %v", g)
	}
	res, err := led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: "req-e2e-1", KeyId: g.GetKeyId(),
		Model: "demo-chat", AmountMicros: 5_000, Pool: accountingv1.Pool_POOL_GENERAL})
	if err != nil {
		t.Fatal(err)
	}
	held := runCtl(t, p.addr, "account", "show", id)
	if num(t, held, "reserved_micros") != "5000" || num(t, held, "available") != "9.995" || num(t, held, "in_flight") != "1" {
		t.Errorf("account while held = %v", held)
	}
	com, err := led.Commit(ctx, &accountingv1.CommitRequest{ReservationId: res.GetReservationId(), ActualMicros: 1_234,
		Usage: &accountingv1.Usage{InputTokens: 10, OutputTokens: 20}, UpstreamModel: "mock-gpt", Channel: "mock"})
	if err != nil {
		t.Fatal(err)
	}
	if com.GetChargedMicros() != 1_234 || com.GetCapped() || com.GetReplayed() {
		t.Errorf("commit = %v", com)
	}
	again, err := led.Commit(ctx, &accountingv1.CommitRequest{ReservationId: res.GetReservationId(), ActualMicros: 1_234})
	if err != nil || !again.GetReplayed() || again.GetChargedMicros() != 1_234 {
		t.Errorf("replayed commit = %v, %v", again, err)
	}
	shown := runCtl(t, p.addr, "account", "show", id)
	if num(t, shown, "balance") != "9.998766" || num(t, shown, "balance_micros") != "9998766" ||
		num(t, shown, "reserved") != "0" || num(t, shown, "available") != "9.998766" || num(t, shown, "in_flight") != "0" {
		t.Errorf("account after commit = %v", shown)
	}
	k := runCtl(t, p.addr, "key", "show", key["id"].(string))
	if num(t, k, "spent_today_micros") != "1234" || num(t, k, "held_today") != "0" {
		t.Errorf("key after commit = %v", k)
	}

	// A service token cannot reach the admin API of the real binary.
	_, err = accountingv1.NewAdminServiceClient(conn).GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: id})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("admin call with the service token: %v", err)
	}
	// A refusal from the real store arrives typed.
	_, err = led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: "req-e2e-2", KeyId: g.GetKeyId(),
		AmountMicros: 2_000_000, Pool: accountingv1.Pool_POOL_GENERAL})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted {
		t.Errorf("over-limit reserve: %v", err)
	} else if len(st.Details()) != 1 {
		t.Errorf("over-limit reserve details = %v", st.Details())
	} else if r, _ := st.Details()[0].(*accountingv1.Refusal); r.GetReason() != accountingv1.Reason_REASON_KEY_LIMIT_REACHED ||
		r.GetLimit() != "daily" || r.GetRetryAfterSeconds() <= 0 {
		t.Errorf("over-limit refusal = %v", r)
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + p.metricsAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s = %d %s", path, resp.StatusCode, body)
		}
	}

	if resp, err := http.Get("http://" + p.metricsAddr + "/debug/pprof/"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("pprof without --pprof: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}

	// An open watch stream must not hold up the shutdown.
	watch, err := led.WatchChanges(ctx, &accountingv1.WatchChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := watch.Recv(); err != nil || m.GetKind() != accountingv1.ChangeKind_CHANGE_KIND_RESET {
		t.Fatalf("first watch message = %v, %v", m, err)
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("Main returned %d:\n%s", code, p.logs.String())
	}
	logs := p.logs.String()
	for _, secretText := range []string{serviceToken, adminToken, secret, string(hash[:])} {
		if strings.Contains(logs, secretText) {
			t.Errorf("logs contain a secret")
		}
	}
	if !strings.Contains(logs, `"accounting stopped"`) {
		t.Errorf("no clean stop in logs:\n%s", logs)
	}
	if err := logtest.Check(logs); err != nil {
		t.Error(err)
	}
}

// TestSweeperExpiresReservations holds a reservation with a 1-second TTL and waits
// for the process's sweeper to release it.
func TestSweeperExpiresReservations(t *testing.T) {
	p := start(t, tablestest.NewDB(t), "--sweep-interval", "100ms")
	ctx := context.Background()
	id := runCtl(t, p.addr, "account", "create")["id"].(string)
	runCtl(t, p.addr, "account", "topup", id, "--amount", "1")
	keyID := runCtl(t, p.addr, "key", "create", "--account", id)["id"].(string)
	conn, err := client.Dial(ctx, p.addr, serviceToken)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	led := accountingv1.NewLedgerServiceClient(conn)
	res, err := led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: "req-sweep", KeyId: keyID,
		AmountMicros: 100, Pool: accountingv1.Pool_POOL_GENERAL, TtlSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		a := runCtl(t, p.addr, "account", "show", id)
		if num(t, a, "reserved_micros") == "0" && num(t, a, "in_flight") == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reservation never expired: %v", a)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rel, err := led.Release(ctx, &accountingv1.ReleaseRequest{ReservationId: res.GetReservationId()})
	if err != nil || rel.GetState() != accountingv1.ReservationState_RESERVATION_STATE_EXPIRED {
		t.Errorf("release after expiry = %v, %v", rel, err)
	}
}

func TestMainRefusesBadConfiguration(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no tokens", nil, nil, "service token missing"},
		{"no admin token", map[string]string{"GATEWAY_SERVICE_TOKEN": serviceToken}, nil, "admin token missing"},
		{"same tokens", map[string]string{"GATEWAY_SERVICE_TOKEN": serviceToken, "GATEWAY_ADMIN_TOKEN": serviceToken}, nil, "must differ"},
		{"short token", map[string]string{"GATEWAY_SERVICE_TOKEN": "short", "GATEWAY_ADMIN_TOKEN": adminToken}, nil, "shorter than"},
		{"missing token file", map[string]string{"GATEWAY_ADMIN_TOKEN": adminToken}, []string{"--service-token-file", "/nonexistent/tok"}, "read token file"},
		{"unknown flag", nil, []string{"--bogus"}, "flag provided but not defined"},
		{"positional", nil, []string{"extra"}, "unexpected arguments"},
		{"archive too soon", map[string]string{"GATEWAY_SERVICE_TOKEN": serviceToken, "GATEWAY_ADMIN_TOKEN": adminToken},
			[]string{"--archive-after", "1m"}, "--archive-after must be 0 or at least 5m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GATEWAY_SERVICE_TOKEN", tc.env["GATEWAY_SERVICE_TOKEN"])
			t.Setenv("GATEWAY_ADMIN_TOKEN", tc.env["GATEWAY_ADMIN_TOKEN"])
			var errb bytes.Buffer
			code := app.Main(context.Background(), tc.args, &errb)
			if code != 2 {
				t.Errorf("exit = %d, want 2", code)
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr = %q, want %q", errb.String(), tc.want)
			}
			if strings.Contains(errb.String(), serviceToken) {
				t.Errorf("stderr shows a token")
			}
		})
	}
}
