package stack

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/demoenv"
	"github.com/llmgw/gateway/internal/goenv"
	"github.com/llmgw/gateway/internal/runfiles"
)

// TestWriteTokenPermissions: a token file is readable by its owner only, also when an
// earlier run (or anyone else) left a world-readable file, or a symlink, at its path:
// os.WriteFile keeps an existing file's mode and follows links.
func TestWriteTokenPermissions(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, path string)
	}{
		{name: "new file", prepare: func(*testing.T, string) {}},
		{name: "world-readable leftover", prepare: func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, 0o644); err != nil { // past the umask
				t.Fatal(err)
			}
		}},
		{name: "symlink to another file", prepare: func(t *testing.T, path string) {
			other := filepath.Join(filepath.Dir(path), "elsewhere")
			if err := os.WriteFile(other, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "admin-token")
			tc.prepare(t, path)
			tok, err := writeToken(path)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if !fi.Mode().IsRegular() {
				t.Fatalf("token path is %v, want a regular file", fi.Mode())
			}
			if perm := fi.Mode().Perm(); perm != 0o600 {
				t.Errorf("token file mode %v, want 0600", perm)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(string(b)) != tok || len(tok) < 32 {
				t.Errorf("file holds %q, token %q", b, tok)
			}
			if other, err := os.ReadFile(filepath.Join(dir, "elsewhere")); err == nil && len(other) != 0 {
				t.Errorf("the token was written through the symlink")
			}
		})
	}
}

// TestChildEnvHoldsOnlyItsSecrets: each child gets only the secrets it uses. The mock
// providers and the front never see a gateway token or a provider credential, extproc
// never sees the admin token, and a token exported in the caller's shell does not leak
// to the others either.
func TestChildEnvHoldsOnlyItsSecrets(t *testing.T) {
	t.Setenv("GATEWAY_ADMIN_TOKEN", "from-the-shell-admin-token")
	t.Setenv("DEMO_OPENAI_KEY", "from-the-shell-provider-key")
	s := &Stack{Config: Config{DatabaseURL: "postgres://u:pw@127.0.0.1/gw"}.FromEnv(),
		AdminToken: "admin-token-0123456789", ServiceToken: "service-token-0123456789",
		clouds: cloudSecrets{[]byte(`{"type":"service_account"}`), []byte(`{"type":"service_account"}`)}}
	s.Catalog = filepath.Join(t.TempDir(), "catalog.yaml") // as Start decided it (renderCatalog)
	cases := []struct {
		part       string
		want, deny []string
	}{
		{part: "mock", deny: []string{"GATEWAY_ADMIN_TOKEN", "GATEWAY_SERVICE_TOKEN", "DEMO_OPENAI_KEY", "DATABASE_URL", "DEMO_AWS_SECRET_ACCESS_KEY", "DEMO_GCP_SERVICE_ACCOUNT"}, want: []string{"MOCK_ADDR"}},
		{part: "front", deny: []string{"GATEWAY_ADMIN_TOKEN", "GATEWAY_SERVICE_TOKEN", "DEMO_OPENAI_KEY", "DATABASE_URL"}},
		{part: "extproc", deny: []string{"GATEWAY_ADMIN_TOKEN", "DATABASE_URL"}, want: append([]string{"GATEWAY_SERVICE_TOKEN", "GATEWAY_CATALOG", "ACCOUNTING_ADDR"}, demoenv.Vars()...)},
		{part: "accounting", deny: []string{"DEMO_OPENAI_KEY"}, want: []string{"GATEWAY_ADMIN_TOKEN", "GATEWAY_SERVICE_TOKEN", "DATABASE_URL"}},
		{part: "console", deny: []string{"GATEWAY_ADMIN_TOKEN", "GATEWAY_SERVICE_TOKEN", "DEMO_OPENAI_KEY", "DATABASE_URL"}, want: []string{"CONSOLE_ADMIN_TOKEN_FILE"}},
	}
	for _, tc := range cases {
		t.Run(tc.part, func(t *testing.T) {
			env := map[string]string{}
			for _, kv := range s.childEnv(tc.part) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v // the last copy wins, as for exec
			}
			for _, k := range tc.deny {
				if v, ok := env[k]; ok {
					t.Errorf("%s gets %s=%q", tc.part, k, v)
				}
			}
			for _, k := range tc.want {
				if env[k] == "" {
					t.Errorf("%s lacks %s", tc.part, k)
				}
			}
		})
	}
	// The console names where the admin token is (the sign-in page says it), never the token.
	if env := strings.Join(s.childEnv("console"), "\n") + "\n"; !strings.Contains(env, "CONSOLE_ADMIN_TOKEN_FILE="+filepath.Join(".run", "admin-token")+"\n") ||
		strings.Contains(env, s.AdminToken) {
		t.Errorf("console env: want the token's file, not the token:\n%s", env)
	}
	env := strings.Join(s.childEnv("extproc"), "\n")
	if !strings.Contains(env, "GATEWAY_SERVICE_TOKEN=service-token-0123456789") || !strings.Contains(env, "DEMO_OPENAI_KEY=sk-mock-openai") {
		t.Errorf("extproc env lacks the stack's own values:\n%s", env)
	}
}

// TestChildEnvGoRuntime: every part runs with one P and without the runtime's deep sleep
// of its system monitor (internal/goenv) unless the caller's environment chose a
// GOMAXPROCS or a schedtrace, which then reaches every part unchanged.
func TestChildEnvGoRuntime(t *testing.T) {
	s := &Stack{Config: Config{}.FromEnv()}
	values := func(part, name string) []string {
		var got []string
		for _, kv := range s.childEnv(part) {
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				got = append(got, v)
			}
		}
		return got
	}
	unset := func(t *testing.T, name string) {
		if v, ok := os.LookupEnv(name); ok {
			t.Cleanup(func() { os.Setenv(name, v) })
			os.Unsetenv(name)
		}
	}
	parts := []string{"mock", "accounting", "console", "extproc", "front"}
	t.Run("default", func(t *testing.T) {
		unset(t, "GOMAXPROCS")
		unset(t, "GODEBUG")
		for _, p := range parts {
			if got := values(p, "GOMAXPROCS"); !slices.Equal(got, []string{"1"}) {
				t.Errorf("%s: GOMAXPROCS %q, want [1]", p, got)
			}
			if got := values(p, "GODEBUG"); !slices.Equal(got, []string{goenv.NoDeepSleep}) {
				t.Errorf("%s: GODEBUG %q, want [%s]", p, got, goenv.NoDeepSleep)
			}
		}
	})
	t.Run("caller's", func(t *testing.T) {
		t.Setenv("GOMAXPROCS", "3")
		t.Setenv("GODEBUG", "schedtrace=0")
		for _, p := range parts {
			if got := values(p, "GOMAXPROCS"); !slices.Equal(got, []string{"3"}) {
				t.Errorf("%s: GOMAXPROCS %q, want [3]", p, got)
			}
			if got := values(p, "GODEBUG"); !slices.Equal(got, []string{"schedtrace=0"}) {
				t.Errorf("%s: GODEBUG %q, want [schedtrace=0]", p, got)
			}
		}
	})
}

// With two accounting replicas, extproc and the console dial both as a list and each
// replica listens where its flags say (the first also where ACCOUNTING_ADDR says).
func TestChildEnvAccountingReplicas(t *testing.T) {
	t.Setenv("ACCOUNTING_REPLICAS", "2")
	s := &Stack{Config: Config{AccountingAddr: "127.0.0.1:50052"}.FromEnv()}
	if s.AccountingReplicas != 2 {
		t.Fatalf("AccountingReplicas = %d from the environment, want 2", s.AccountingReplicas)
	}
	s.Accounting = []Replica{{"accounting", "127.0.0.1:50052", "127.0.0.1:9102"}, {"accounting-2", "127.0.0.1:41000", "127.0.0.1:41001"}}
	addr := func(part string) string {
		var got string
		for _, kv := range s.childEnv(part) {
			if v, ok := strings.CutPrefix(kv, "ACCOUNTING_ADDR="); ok {
				got = v
			}
		}
		return got
	}
	for part, want := range map[string]string{
		"extproc":    "127.0.0.1:50052,127.0.0.1:41000",
		"console":    "127.0.0.1:50052,127.0.0.1:41000",
		"accounting": "127.0.0.1:50052",
	} {
		if got := addr(part); got != want {
			t.Errorf("%s: ACCOUNTING_ADDR=%q, want %q", part, got, want)
		}
	}
}

// A second gateway's extproc listens where its own addresses say, and its front's
// envoy.yaml (a file of its own) sends to that extproc and listens at its own address.
func TestSecondGatewayAddresses(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "envoy"), 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := "address: 127.0.0.1\nport_value: 8080\naddress: 127.0.0.1\nport_value: 50051\n"
	if err := os.WriteFile(filepath.Join(root, "envoy", "envoy.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Stack{Config: Config{Root: root, RunDir: run, ExtprocAddr: "127.0.0.1:50051", ExtprocMetricsAddr: "127.0.0.1:9101"}}
	g := Gateway{Extproc: "extproc-2", Front: "front-2", Addr: "127.0.0.1:41080", AdminAddr: "127.0.0.1:41901",
		ExtprocAddr: "127.0.0.1:41051", ExtprocMetricsAddr: "127.0.0.1:41101", envoyConfig: "envoy-2.yaml"}
	env := map[string]string{}
	for _, kv := range s.gatewayEnv("extproc", g) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["EXTPROC_ADDR"] != g.ExtprocAddr || env["EXTPROC_METRICS_ADDR"] != g.ExtprocMetricsAddr {
		t.Errorf("extproc-2 listens at %s (metrics %s), want %s (%s)", env["EXTPROC_ADDR"], env["EXTPROC_METRICS_ADDR"], g.ExtprocAddr, g.ExtprocMetricsAddr)
	}
	out, err := s.renderEnvoyConfig(g)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	if want := "address: 127.0.0.1\nport_value: 41080\naddress: 127.0.0.1\nport_value: 41051\n"; filepath.Base(out) != "envoy-2.yaml" || string(b) != want {
		t.Errorf("%s:\n%s\nwant envoy-2.yaml:\n%s", out, b, want)
	}
}

// TestDemoCatalogWorkingCopy: without GATEWAY_CATALOG the stack serves RunDir/catalog.yaml,
// written anew from the tracked demo catalog at every start and pointed at this stack's
// mock, so an experiment edits the copy and the tracked file never changes.
func TestDemoCatalogWorkingCopy(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	tracked := DemoCatalog(root)
	if err := os.MkdirAll(filepath.Dir(tracked), 0o755); err != nil {
		t.Fatal(err)
	}
	demo := "clusters:\n  - address: \"" + DefaultMockAddr + "\"\n"
	if err := os.WriteFile(tracked, []byte(demo), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func() string {
		t.Helper()
		s := &Stack{Config: Config{Root: root, RunDir: run, MockAddr: "127.0.0.1:1"}}
		if err := s.renderCatalog(); err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(run, "catalog.yaml"); s.Catalog != want {
			t.Fatalf("serves %s, want %s", s.Catalog, want)
		}
		b, err := os.ReadFile(s.Catalog)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want := "clusters:\n  - address: \"127.0.0.1:1\"\n"
	if got := start(); got != want {
		t.Fatalf("working copy %q, want %q", got, want)
	}
	if err := os.WriteFile(filepath.Join(run, "catalog.yaml"), []byte("edited"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := start(); got != want {
		t.Fatalf("after an edit and a restart the copy is %q, want it written anew: %q", got, want)
	}
	if b, _ := os.ReadFile(tracked); string(b) != demo {
		t.Fatalf("the tracked catalog changed: %q", b)
	}
	if cfg := (Config{Root: root}).FromEnv(); cfg.Catalog != "" && os.Getenv("GATEWAY_CATALOG") == "" {
		t.Fatalf("default catalog %q, want the working copy (empty)", cfg.Catalog)
	}
}

// TestClientFiles: a started stack leaves its clients what they need in the run
// directory: the base URL (the SDK examples) and what accounting's clients dial
// (gatewayctl), so that both follow a stack whose ports were moved.
func TestClientFiles(t *testing.T) {
	run := t.TempDir()
	s := &Stack{Config: Config{RunDir: run, AccountingAddr: "127.0.0.1:60052"}, BaseURL: "http://127.0.0.1:18081/v1",
		Accounting: []Replica{{"accounting", "127.0.0.1:60052", ""}, {"accounting-2", "127.0.0.1:60053", ""}}}
	if err := s.writeClientFiles(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		runfiles.BaseURLFile:        "http://127.0.0.1:18081/v1\n",
		runfiles.AccountingAddrFile: "127.0.0.1:60052,127.0.0.1:60053\n",
	} {
		if b, err := os.ReadFile(filepath.Join(run, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", name, b, err, want)
		}
	}
}

// TestBusyPortLeavesTheRunningStackAlone: a second start while a stack is up (its ports
// taken) fails before it writes anything, so the running stack's admin token and
// client files stay valid.
func TestBusyPortLeavesTheRunningStackAlone(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	run := t.TempDir()
	files := map[string]string{
		runfiles.AdminTokenFile: "the-running-stacks-token\n", "service-token": "the-running-stacks-service-token\n",
		runfiles.AccountingAddrFile: "127.0.0.1:60052\n", runfiles.BaseURLFile: "http://" + l.Addr().String() + "/v1\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(run, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err = Start(context.Background(), Config{Root: t.TempDir(), RunDir: run, GatewayAddr: l.Addr().String(),
		DatabaseURL: "postgres://nobody@127.0.0.1:1/none", Log: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("start on a busy port: %v", err)
	}
	for name, want := range files {
		if b, _ := os.ReadFile(filepath.Join(run, name)); string(b) != want {
			t.Errorf("%s = %q after the refused start, want %q", name, b, want)
		}
	}
}

// With OIDC the console is configured for the local provider (the contract's single
// sign-on settings, the accounting credential by its file, never the token itself);
// without it the console gets none of them.
func TestChildEnvOIDC(t *testing.T) {
	root := t.TempDir()
	s := &Stack{Config: Config{Root: root, OIDC: true, OIDCAddr: "127.0.0.1:8191", ConsoleAddr: "127.0.0.1:8190"}.FromEnv(), AdminToken: "admin-token-0123456789"}
	env := map[string]string{}
	for _, kv := range s.childEnv("console") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, want := range map[string]string{
		"CONSOLE_OIDC_ISSUER":             "http://127.0.0.1:8191",
		"CONSOLE_OIDC_CLIENT_ID":          OIDCClientID,
		"CONSOLE_OIDC_CLIENT_SECRET_FILE": filepath.Join(root, ".run", "oidc-client-secret"),
		"CONSOLE_PUBLIC_URL":              "http://127.0.0.1:8190",
		"CONSOLE_ACCOUNTING_TOKEN_FILE":   filepath.Join(root, ".run", "admin-token"),
	} {
		if env[k] != want {
			t.Errorf("console %s=%q, want %q", k, env[k], want)
		}
	}
	if strings.Contains(strings.Join(s.childEnv("console"), "\n"), s.AdminToken) {
		t.Error("the console gets the admin token itself")
	}
	s.OIDC = false
	for _, kv := range s.childEnv("console") {
		if strings.HasPrefix(kv, "CONSOLE_OIDC_") && os.Getenv(strings.SplitN(kv, "=", 2)[0]) == "" {
			t.Errorf("without OIDC the console gets %s", kv)
		}
	}
}
