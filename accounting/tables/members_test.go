package tables_test

import (
	"context"
	"errors"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables"
)

// Members are added once per person, role and scope (again: the same row), listed all
// or by account, found by email in any case, and removed; the table refuses a member
// without a project and a project without its account.
func TestMembers(t *testing.T) {
	f := newFixture(t, 4)
	s := tables.New(f.pool, tables.Options{})
	ctx := context.Background()
	acc := f.account(t, "default", 0).ID
	admin, err := s.AddMember(ctx, tables.Member{Email: " Ada@Example.com", Role: "admin"})
	if err != nil || admin.Email != "ada@example.com" || admin.AccountID != "" || admin.ID == "" {
		t.Fatalf("add admin: %+v %v", admin, err)
	}
	if again, err := s.AddMember(ctx, tables.Member{Email: "ada@example.com", Role: "admin"}); err != nil || again.ID != admin.ID {
		t.Fatalf("added again: %+v %v, want %s", again, err, admin.ID)
	}
	member, err := s.AddMember(ctx, tables.Member{Email: "bob@example.com", Role: "member", AccountID: acc, ProjectID: "proj-1"})
	if err != nil || member.AccountID != acc || member.ProjectID != "proj-1" {
		t.Fatalf("add member: %+v %v", member, err)
	}
	for _, bad := range []tables.Member{{Email: "c@example.com", Role: "member", AccountID: acc}, {Email: "c@example.com", Role: "viewer", ProjectID: "p"},
		{Email: "c@example.com", Role: "owner"}, {Email: "", Role: "admin"}} {
		if m, err := s.AddMember(ctx, bad); err == nil {
			t.Errorf("%+v accepted: %+v", bad, m)
		}
	}
	if all, err := s.ListMembers(ctx, ""); err != nil || len(all) != 2 {
		t.Fatalf("list: %+v %v", all, err)
	}
	if byAcc, err := s.ListMembers(ctx, acc); err != nil || len(byAcc) != 1 || byAcc[0].ID != member.ID {
		t.Fatalf("list by account: %+v %v", byAcc, err)
	}
	if ms, err := s.MembershipsOf(ctx, "BOB@example.com"); err != nil || len(ms) != 1 || ms[0].Role != "member" {
		t.Fatalf("memberships of bob: %+v %v", ms, err)
	}
	if gone, err := s.RemoveMember(ctx, member.ID); err != nil || gone.ID != member.ID {
		t.Fatalf("remove: %+v %v", gone, err)
	}
	if _, err := s.RemoveMember(ctx, member.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("removed twice: %v", err)
	}
	if ms, _ := s.MembershipsOf(ctx, "bob@example.com"); len(ms) != 0 {
		t.Fatalf("bob after removal: %+v", ms)
	}
}
