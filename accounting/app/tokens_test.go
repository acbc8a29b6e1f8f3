package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/llmgw/gateway/accounting/authn"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

const (
	svcOld = "service-token-old-0123456789"
	svcNew = "service-token-new-0123456789"
	admOld = "admin-token-old-0123456789"
	admNew = "admin-token-new-0123456789"
)

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
			got, err := loadTokens(tt.file, "X", func(string) string { return tt.env })
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

func TestTokenSetsValidate(t *testing.T) {
	tests := []struct {
		name string
		set  TokenSets
		want []string // substrings of the error; none means valid
	}{
		{name: "one each", set: TokenSets{Service: []string{svcOld}, Admin: []string{admOld}}},
		{name: "rotation of both", set: TokenSets{Service: []string{svcOld, svcNew}, Admin: []string{admOld, admNew}}},
		{name: "uneven", set: TokenSets{Service: []string{svcOld, svcNew}, Admin: []string{admOld}}},
		{name: "none", set: TokenSets{}, want: []string{"service token missing", "admin token missing"}},
		{name: "short second token", set: TokenSets{Service: []string{svcOld, "short"}, Admin: []string{admOld}}, want: []string{"service token shorter"}},
		{name: "shared token", set: TokenSets{Service: []string{svcOld, admNew}, Admin: []string{admOld, admNew}}, want: []string{"must differ"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.set.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, lacks %q", err, w)
				}
			}
		})
	}
}

func TestMultiAuthorizerRoles(t *testing.T) {
	az, err := newMultiAuthorizer(TokenSets{Service: []string{svcOld, svcNew}, Admin: []string{admOld}})
	if err != nil {
		t.Fatal(err)
	}
	ledgerM := accountingv1.LedgerService_Reserve_FullMethodName
	adminM := accountingv1.AdminService_CreateKey_FullMethodName
	tests := []struct {
		name   string
		token  string
		method string
		ok     bool
	}{
		{"old service token", svcOld, ledgerM, true},
		{"new service token", svcNew, ledgerM, true},
		{"service token on admin", svcNew, adminM, false},
		{"admin token on admin", admOld, adminM, true},
		{"admin token on ledger", admOld, ledgerM, true},
		{"retired token", "service-token-gone-0123456789", ledgerM, false},
		{"no token", "", ledgerM, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.token != "" {
				ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+tt.token))
			}
			err := az.check(ctx, tt.method)
			if (err == nil) != tt.ok {
				t.Errorf("check = %v, want ok %v", err, tt.ok)
			}
			if err != nil && err != errUnauthenticated {
				t.Errorf("refusal %v is not the one unauthenticated answer", err)
			}
		})
	}
	if az.roleOf(admOld) != authn.RoleAdmin || az.roleOf(svcNew) != authn.RoleService {
		t.Error("roles")
	}
}
