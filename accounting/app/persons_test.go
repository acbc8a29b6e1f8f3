package app_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestPersonThroughAStandby: a call made for a person reaches a standby, which sends
// it on to the owner with the person named: the owner refuses what the person's role
// may not do (it does not become the console's full rights on the way), and records
// what it may, with the person, in the audit log; gatewayctl's changes are recorded
// as its own.
func TestPersonThroughAStandby(t *testing.T) {
	db := tablestest.NewDB(t)
	a := start(t, db)
	waitReady(t, 30*time.Second, a)
	b := start(t, db)
	waitReady(t, 30*time.Second, a, b)
	if owners(a) != 1 || owners(b) != 0 {
		t.Fatalf("a owns %d times, b %d; want a the owner", owners(a), owners(b))
	}
	acct := runCtl(t, a.addr, "account", "create")["id"].(string)
	runCtl(t, a.addr, "member", "add", "--email", "vi@example.com", "--role", "viewer", "--account", acct)
	runCtl(t, a.addr, "member", "add", "--email", "bo@example.com", "--role", "billing", "--account", acct)

	person := func(email string) accountingv1.AdminServiceClient {
		cc, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(client.PersonCredentials(adminToken, email)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		return accountingv1.NewAdminServiceClient(cc)
	}
	ctx := context.Background()
	_, err := person("vi@example.com").TopUp(ctx, &accountingv1.TopUpRequest{AccountId: acct, AmountMicros: 1})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a viewer's top-up through the standby: %v", err)
	}
	if _, err := person("bo@example.com").TopUp(ctx, &accountingv1.TopUpRequest{AccountId: acct, AmountMicros: 1}); err != nil {
		t.Fatalf("billing's top-up through the standby: %v", err)
	}
	entries := runCtl(t, b.addr, "audit", "list", "--account", acct)["entries"].([]any)
	var got []string
	for _, e := range entries {
		m := e.(map[string]any)
		got = append(got, m["actor"].(string)+" "+m["via"].(string)+" "+m["action"].(string))
	}
	want := []string{"bo@example.com console account.topup", "admin-token gatewayctl member.add",
		"admin-token gatewayctl member.add", "admin-token gatewayctl account.create"}
	if len(got) != len(want) {
		t.Fatalf("audit %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("audit %v, want %v", got, want)
			break
		}
	}
}
