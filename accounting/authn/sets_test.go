package authn

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Tokens of a rotation: an old and a new one per role.
const (
	svcOld = "service-token-old-0123456789"
	svcNew = "service-token-new-0123456789"
	admOld = "admin-token-old-0123456789"
	admNew = "admin-token-new-0123456789"
)

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

func TestSetAuthorizerRoles(t *testing.T) {
	az, err := NewSetAuthorizer(TokenSets{Service: []string{svcOld, svcNew}, Admin: []string{admOld}})
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
	if az.RoleOf(admOld) != RoleAdmin || az.RoleOf(svcNew) != RoleService {
		t.Error("roles")
	}
}
