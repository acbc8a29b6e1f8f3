package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestMain drops the template database the PostgreSQL-backed tests made.
func TestMain(m *testing.M) { tablestest.Main(m) }

func i64(v int64) *int64 { return &v }

// wantCode fails unless err is a status of code whose message contains msg.
func wantCode(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	if st, _ := status.FromError(err); st.Code() != code || !strings.Contains(st.Message(), msg) {
		t.Errorf("%s: %v, want %v containing %q", what, err, code, msg)
	}
}

// TestProjectsOverTheJournalEngine: the AdminService's projects and key placement,
// served by the journal engine with its derived tables.
func TestProjectsOverTheJournalEngine(t *testing.T) {
	st, _ := enginetest.NewLedger(t, 4)
	f := servertest.Start(t, st, servertest.Options{})
	admin := f.Admin(t, servertest.AdminToken)
	ctx := context.Background()

	acct, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a := acct.GetAccount().GetId()
	other, _ := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})

	// Bad requests change nothing.
	for name, tc := range map[string]struct {
		req  *accountingv1.CreateProjectRequest
		code codes.Code
		msg  string
	}{
		"no account":     {&accountingv1.CreateProjectRequest{Name: "x"}, codes.InvalidArgument, "account_id is required"},
		"no name":        {&accountingv1.CreateProjectRequest{AccountId: a}, codes.InvalidArgument, "a project needs a name"},
		"negative limit": {&accountingv1.CreateProjectRequest{AccountId: a, Name: "x", LimitMicros: i64(-1)}, codes.InvalidArgument, "limit_micros must not be negative"},
		"zero rpm":       {&accountingv1.CreateProjectRequest{AccountId: a, Name: "x", Rpm: i64(0)}, codes.InvalidArgument, "rpm"},
		"empty model":    {&accountingv1.CreateProjectRequest{AccountId: a, Name: "x", Models: []string{"m", ""}}, codes.InvalidArgument, "empty names"},
		"unknown parent": {&accountingv1.CreateProjectRequest{AccountId: a, Name: "x", ParentId: "3f6b1c9e-0000-4000-8000-000000000000"}, codes.InvalidArgument, "parent"},
		"unknown account": {&accountingv1.CreateProjectRequest{AccountId: "3f6b1c9e-0000-4000-8000-000000000000", Name: "x"},
			codes.NotFound, "not found"},
	} {
		_, err := admin.CreateProject(ctx, tc.req)
		wantCode(t, name, err, tc.code, tc.msg)
	}
	if l, err := admin.ListProjects(ctx, &accountingv1.ListProjectsRequest{AccountId: a}); err != nil || len(l.GetProjects()) != 0 {
		t.Fatalf("projects after refusals: %v, %v", l, err)
	}

	created, err := admin.CreateProject(ctx, &accountingv1.CreateProjectRequest{AccountId: a, Name: "team",
		DailyLimitMicros: i64(1_000_000), MonthlyLimitMicros: i64(5_000_000), LimitMicros: i64(9_000_000),
		Rpm: i64(60), Tpm: i64(1_000), Models: []string{"demo-chat"}})
	if err != nil {
		t.Fatal(err)
	}
	p := created.GetProject()
	want := &accountingv1.Project{Id: p.GetId(), AccountId: a, Name: "team", DailyLimitMicros: i64(1_000_000),
		MonthlyLimitMicros: i64(5_000_000), LimitMicros: i64(9_000_000), Rpm: i64(60), Tpm: i64(1_000),
		Models: []string{"demo-chat"}, CreatedAt: p.GetCreatedAt()}
	if diff := cmp.Diff(want, p, protocmp.Transform()); diff != "" || p.GetCreatedAt() == nil {
		t.Errorf("created (-want +got)\n%s", diff)
	}
	got, err := admin.GetProject(ctx, &accountingv1.GetProjectRequest{ProjectId: p.GetId()})
	if diff := cmp.Diff(want, got.GetProject(), protocmp.Transform()); err != nil || diff != "" {
		t.Errorf("get (-want +got) %v\n%s", err, diff)
	}

	// Update clears each setting, then sets one again, leaving the others.
	cleared, err := admin.UpdateProject(ctx, &accountingv1.UpdateProjectRequest{ProjectId: p.GetId(),
		DailyLimit: &accountingv1.LimitUpdate{}, MonthlyLimit: &accountingv1.LimitUpdate{}, Limit: &accountingv1.LimitUpdate{},
		Rpm: &accountingv1.RateUpdate{}, Tpm: &accountingv1.RateUpdate{}, Models: &accountingv1.ModelList{}})
	if err != nil {
		t.Fatal(err)
	}
	if c := cleared.GetProject(); c.DailyLimitMicros != nil || c.MonthlyLimitMicros != nil || c.LimitMicros != nil ||
		c.Rpm != nil || c.Tpm != nil || c.Models != nil || c.GetName() != "team" {
		t.Errorf("cleared %v", c)
	}
	name := "renamed"
	set, err := admin.UpdateProject(ctx, &accountingv1.UpdateProjectRequest{ProjectId: p.GetId(), Name: &name,
		Limit: &accountingv1.LimitUpdate{Micros: i64(2_000_000)}, Tpm: &accountingv1.RateUpdate{Value: i64(5_000)}})
	if s := set.GetProject(); err != nil || s.GetName() != name || s.GetLimitMicros() != 2_000_000 || s.GetTpm() != 5_000 ||
		s.DailyLimitMicros != nil {
		t.Errorf("set %v, %v", s, err)
	}
	_, err = admin.UpdateProject(ctx, &accountingv1.UpdateProjectRequest{ProjectId: p.GetId(), DailyLimit: &accountingv1.LimitUpdate{Micros: i64(-5)}})
	wantCode(t, "negative daily limit", err, codes.InvalidArgument, "daily_limit must not be negative")
	_, err = admin.UpdateProject(ctx, &accountingv1.UpdateProjectRequest{ProjectId: "3f6b1c9e-0000-4000-8000-000000000000", Name: &name})
	wantCode(t, "update unknown", err, codes.NotFound, "not found")

	// Keys: created into a project atomically, moved, given and cleared rates.
	foreign, _ := admin.CreateProject(ctx, &accountingv1.CreateProjectRequest{AccountId: other.GetAccount().GetId(), Name: "theirs"})
	_, err = admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: a, ProjectId: foreign.GetProject().GetId()})
	wantCode(t, "key into another account's project", err, codes.InvalidArgument, "not a project of the key's account")
	if keys, _ := admin.ListKeys(ctx, &accountingv1.ListKeysRequest{AccountId: a}); len(keys.GetKeys()) != 0 {
		t.Fatalf("a refused key create made %v", keys.GetKeys())
	}
	k, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: a, Name: "k", ProjectId: p.GetId(), Rpm: i64(3), Tpm: i64(300)})
	if err != nil {
		t.Fatal(err)
	}
	if kk := k.GetKey(); kk.GetProjectId() != p.GetId() || kk.GetRpm() != 3 || kk.GetTpm() != 300 {
		t.Errorf("created key %v", kk)
	}
	kid := k.GetKey().GetId()
	renamed := "moved"
	_, err = admin.UpdateKey(ctx, &accountingv1.UpdateKeyRequest{KeyId: kid, Name: &renamed, Tpm: &accountingv1.RateUpdate{Value: i64(0)}})
	wantCode(t, "zero tpm", err, codes.InvalidArgument, "tpm")
	if g, _ := admin.GetKey(ctx, &accountingv1.GetKeyRequest{KeyId: kid}); g.GetKey().GetName() != "k" {
		t.Errorf("a refused update renamed the key: %v", g.GetKey())
	}
	none := ""
	u, err := admin.UpdateKey(ctx, &accountingv1.UpdateKeyRequest{KeyId: kid, Name: &renamed, ProjectId: &none,
		Rpm: &accountingv1.RateUpdate{}})
	if uk := u.GetKey(); err != nil || uk.GetProjectId() != "" || uk.Rpm != nil || uk.GetTpm() != 300 || uk.GetName() != renamed {
		t.Errorf("moved out %v, %v", uk, err)
	}
	pid := p.GetId()
	if _, err := admin.UpdateKey(ctx, &accountingv1.UpdateKeyRequest{KeyId: kid, ProjectId: &pid}); err != nil {
		t.Fatal(err)
	}
	g, _ := admin.GetKey(ctx, &accountingv1.GetKeyRequest{KeyId: kid})
	l, _ := admin.ListKeys(ctx, &accountingv1.ListKeysRequest{AccountId: a})
	if g.GetKey().GetProjectId() != pid || len(l.GetKeys()) != 1 || l.GetKeys()[0].GetProjectId() != pid ||
		l.GetKeys()[0].GetTpm() != 300 || l.GetKeys()[0].Rpm != nil {
		t.Errorf("get %v, list %v", g.GetKey(), l.GetKeys())
	}

	// Deleting a project in use is a failed precondition, saying what is left.
	_, err = admin.DeleteProject(ctx, &accountingv1.DeleteProjectRequest{ProjectId: pid})
	wantCode(t, "delete with a key", err, codes.FailedPrecondition, "still has 1 keys")
	if r := refusalOf(t, err); r.GetReason() != accountingv1.Reason_REASON_IN_USE {
		t.Errorf("refusal %v", r)
	}

	// Usage of a project, and by project.
	_, err = admin.GetUsage(ctx, &accountingv1.GetUsageRequest{AccountId: a, ProjectId: foreign.GetProject().GetId()})
	wantCode(t, "usage of another account's project", err, codes.NotFound, "not found")
	ur, err := admin.GetUsage(ctx, &accountingv1.GetUsageRequest{AccountId: a, ProjectId: pid, GroupBy: accountingv1.UsageGroup_USAGE_GROUP_PROJECT})
	if err != nil || len(ur.GetRows()) != 0 {
		t.Errorf("usage of a project without charges %v, %v", ur, err)
	}

	if _, err := admin.UpdateKey(ctx, &accountingv1.UpdateKeyRequest{KeyId: kid, ProjectId: &none}); err != nil {
		t.Fatal(err)
	}
	d, err := admin.DeleteProject(ctx, &accountingv1.DeleteProjectRequest{ProjectId: pid})
	if err != nil || d.GetProject().GetId() != pid {
		t.Fatalf("delete %v, %v", d, err)
	}
	_, err = admin.GetProject(ctx, &accountingv1.GetProjectRequest{ProjectId: pid})
	wantCode(t, "deleted", err, codes.NotFound, "not found")
	_, err = admin.GetProject(ctx, &accountingv1.GetProjectRequest{})
	wantCode(t, "no id", err, codes.InvalidArgument, "project_id is required")
}
