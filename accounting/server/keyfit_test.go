package server_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestKeyWithinItsProjects: a key's own limits and allowlist may not go beyond its
// project's or an ancestor's, at creation and by an update, for any gRPC caller (the admin token as gatewayctl
// sends it, and a project's member through the console's credential): refused with
// InvalidArgument naming the project, nothing created; a key at the limits, or
// leaving a setting unset, fits.
func TestKeyWithinItsProjects(t *testing.T) {
	st, pool := enginetest.NewLedger(t, 4)
	f := servertest.Start(t, st, servertest.Options{Members: tables.New(pool, tables.Options{})})
	admin := f.Admin(t, servertest.AdminToken)
	ctx := context.Background()
	acct, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a := acct.GetAccount().GetId()
	top, err := admin.CreateProject(ctx, &accountingv1.CreateProjectRequest{AccountId: a, Name: "research",
		DailyLimitMicros: i64(5_000_000), Rpm: i64(60), Models: []string{"demo-chat", "demo-claude"}})
	if err != nil {
		t.Fatal(err)
	}
	child, err := admin.CreateProject(ctx, &accountingv1.CreateProjectRequest{AccountId: a, Name: "vision", ParentId: top.GetProject().GetId(),
		MonthlyLimitMicros: i64(20_000_000), Tpm: i64(1000)})
	if err != nil {
		t.Fatal(err)
	}
	p := child.GetProject().GetId()
	if _, err := admin.AddMember(ctx, &accountingv1.AddMemberRequest{Email: "mem@example.com", Role: "member", ProjectId: p}); err != nil {
		t.Fatal(err)
	}
	member := f.Person(t, "mem@example.com")

	for name, c := range map[string]struct {
		req *accountingv1.CreateKeyRequest
		msg string
	}{
		"daily above the parent's": {&accountingv1.CreateKeyRequest{DailyLimitMicros: i64(5_000_001)}, `daily limit 5.000001 exceeds the daily limit of project "research"`},
		"monthly above its own":    {&accountingv1.CreateKeyRequest{MonthlyLimitMicros: i64(21_000_000)}, `monthly limit 21 exceeds the monthly limit of project "vision"`},
		"rpm above the parent's":   {&accountingv1.CreateKeyRequest{Rpm: i64(61)}, `rpm 61 exceeds the rpm of project "research"`},
		"tpm above its own":        {&accountingv1.CreateKeyRequest{Tpm: i64(1001)}, `tpm 1001 exceeds the tpm of project "vision"`},
		"a model the parent lacks": {&accountingv1.CreateKeyRequest{AllowedModels: []string{"demo-chat", "demo-gpt"}}, `model "demo-gpt", which project "research"`},
	} {
		for who, c2 := range map[string]accountingv1.AdminServiceClient{"admin token": admin, "member": member} {
			req := c.req
			req.AccountId, req.ProjectId = a, p
			_, err := c2.CreateKey(ctx, req)
			wantCode(t, name+" ("+who+")", err, codes.InvalidArgument, c.msg)
		}
	}
	keys, err := admin.ListKeys(ctx, &accountingv1.ListKeysRequest{AccountId: a})
	if err != nil || len(keys.GetKeys()) != 0 {
		t.Fatalf("refused keys were created: %v %v", keys.GetKeys(), err)
	}
	// At every limit, and with nothing set: both fit.
	for who, c := range map[string]accountingv1.AdminServiceClient{"admin token": admin, "member": member} {
		if _, err := c.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: a, ProjectId: p, DailyLimitMicros: i64(5_000_000),
			MonthlyLimitMicros: i64(20_000_000), Rpm: i64(60), Tpm: i64(1000), AllowedModels: []string{"demo-claude"}}); err != nil {
			t.Errorf("a key at the limits (%s): %v", who, err)
		}
		if _, err := c.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: a, ProjectId: p}); err != nil {
			t.Errorf("a key without limits (%s): %v", who, err)
		}
	}
	// Outside any project nothing bounds a key but its account.
	outside, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: a, DailyLimitMicros: i64(1_000_000_000), Rpm: i64(100)})
	if err != nil {
		t.Fatalf("a key outside projects: %v", err)
	}

	// An update is held to the same: a limit it raises, or a move into the project
	// with the key's settings as they are; a rename, or a limit within, passes.
	kid := outside.GetKey().GetId()
	_, err = admin.UpdateKey(ctx, &accountingv1.UpdateKeyRequest{KeyId: kid, ProjectId: &p})
	wantCode(t, "a move into the project", err, codes.InvalidArgument, `the key's daily limit 1000 exceeds the daily limit of project "research"`)
	_, err = admin.UpdateKey(ctx, &accountingv1.UpdateKeyRequest{KeyId: kid, ProjectId: &p, DailyLimit: &accountingv1.LimitUpdate{Micros: i64(1_000_000)}})
	wantCode(t, "a move with the rpm too high", err, codes.InvalidArgument, `the key's rpm 100 exceeds the rpm of project "research"`)
	if _, err := admin.UpdateKey(ctx, &accountingv1.UpdateKeyRequest{KeyId: kid, ProjectId: &p, DailyLimit: &accountingv1.LimitUpdate{Micros: i64(1_000_000)},
		Rpm: &accountingv1.RateUpdate{}}); err != nil {
		t.Errorf("a move within the limits: %v", err)
	}
	_, err = admin.UpdateKey(ctx, &accountingv1.UpdateKeyRequest{KeyId: kid, Tpm: &accountingv1.RateUpdate{Value: i64(5000)}})
	wantCode(t, "a tpm raised above the project's", err, codes.InvalidArgument, `the key's tpm 5000 exceeds the tpm of project "vision"`)
	name := "renamed"
	if _, err := admin.UpdateKey(ctx, &accountingv1.UpdateKeyRequest{KeyId: kid, Name: &name}); err != nil {
		t.Errorf("a rename: %v", err)
	}
	k, err := admin.GetKey(ctx, &accountingv1.GetKeyRequest{KeyId: kid})
	if err != nil || k.GetKey().GetProjectId() != p || k.GetKey().Tpm != nil || k.GetKey().GetDailyLimitMicros() != 1_000_000 {
		t.Errorf("the key after its updates: %v %v", k.GetKey(), err)
	}
}
