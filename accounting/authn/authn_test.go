package authn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

const (
	svc = "service-token-0123456789"
	adm = "admin-token-0123456789"
)

func TestRolesAndMethods(t *testing.T) {
	a, err := NewAuthorizer(Tokens{Service: svc, Admin: adm})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		token   string
		method  string
		allowed bool
	}{
		{"service on ledger", svc, accountingv1.LedgerService_Reserve_FullMethodName, true},
		{"service on watch", svc, accountingv1.LedgerService_WatchChanges_FullMethodName, true},
		{"service on admin", svc, accountingv1.AdminService_CreateKey_FullMethodName, false},
		{"admin on admin", adm, accountingv1.AdminService_CreateKey_FullMethodName, true},
		{"admin on ledger", adm, accountingv1.LedgerService_Authenticate_FullMethodName, true},
		{"empty token", "", accountingv1.LedgerService_Reserve_FullMethodName, false},
		{"prefix of the token", svc[:len(svc)-1], accountingv1.LedgerService_Reserve_FullMethodName, false},
		{"token plus suffix", svc + "x", accountingv1.LedgerService_Reserve_FullMethodName, false},
		{"service on another service", svc, "/grpc.health.v1.Health/Check", false},
		{"service on a look-alike name", svc, "/accounting.v1.LedgerServiceX/Reserve", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Allowed(a.RoleOf(tc.token), tc.method); got != tc.allowed {
				t.Errorf("allowed = %v, want %v", got, tc.allowed)
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	tests := []struct {
		name string
		md   metadata.MD
		want string
	}{
		{"bearer", metadata.Pairs("authorization", "Bearer abc"), "abc"},
		{"lower-case scheme", metadata.Pairs("authorization", "bearer abc"), "abc"},
		{"basic", metadata.Pairs("authorization", "Basic abc"), ""},
		{"bare token", metadata.Pairs("authorization", "abc"), ""},
		{"none", metadata.MD{}, ""},
		{"nil", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := BearerToken(tc.md); got != tc.want {
				t.Errorf("BearerToken = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLoadTokenAndValidate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tok")
	if err := os.WriteFile(file, []byte("  from-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rotating := filepath.Join(dir, "rotating")
	if err := os.WriteFile(rotating, []byte("# rotated 2026-01\n\n  tok-new-0123456789  \r\ntok-old-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(string) string { return "from-env-0123456789" }
	tests := []struct {
		name    string
		file    string
		want    string
		wantErr string
	}{
		{"file wins", file, "from-file-0123456789", ""},
		{"rotation: the first is presented", rotating, "tok-new-0123456789", ""},
		{"env", "", "from-env-0123456789", ""},
		{"missing file", filepath.Join(dir, "nope"), "", "read token file"},
		{"empty file", empty, "", "is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LoadToken(tc.file, EnvServiceToken, env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("LoadToken = %q, %v; want %q", got, err, tc.want)
			}
		})
	}

	err := Tokens{Service: "", Admin: "short"}.Validate()
	if err == nil || !strings.Contains(err.Error(), "service token missing") || !strings.Contains(err.Error(), "admin token shorter") {
		t.Errorf("Validate must report every problem: %v", err)
	}
	if err := (Tokens{Service: svc, Admin: svc}).Validate(); err == nil || strings.Contains(err.Error(), svc) {
		t.Errorf("equal tokens: %v", err)
	}
}

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		file    string
		env     string
		want    []string
		wantErr string
	}{
		{name: "one token in the env", env: svcOld, want: []string{svcOld}},
		{name: "comma-separated env", env: " " + svcOld + " ,," + svcNew + " ", want: []string{svcOld, svcNew}},
		{name: "unset env", env: "", want: nil},
		{name: "one per line", file: write("two", "# rotating\n"+svcOld+"\n\n"+svcNew+"\r\n"), want: []string{svcOld, svcNew}},
		{name: "file wins over env", file: write("one", svcNew+"\n"), env: svcOld, want: []string{svcNew}},
		{name: "empty file", file: write("empty", "\n# nothing\n"), wantErr: "is empty"},
		{name: "missing file", file: filepath.Join(dir, "nope"), wantErr: "read token file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadTokens(tt.file, "X", func(string) string { return tt.env })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
