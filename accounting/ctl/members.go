package ctl

import (
	"context"
	"strings"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Members: member add|list|remove, who may do what through the console.

var memberCommands = map[string]command{
	"member add": {flags: map[string]flagKind{"email": stringFlag, "role": stringFlag, "account": stringFlag, "project": stringFlag},
		entity: "account or project", run: memberAdd},
	"member list":   {flags: map[string]flagKind{"account": stringFlag}, entity: "account", run: memberList},
	"member remove": {nargs: 1, entity: "member", run: memberRemove},
}

// Member is the JSON shape of a member: account_id and project_id "" when the role
// is not scoped to one (as a key's project_id).
type Member struct {
	ID        string  `json:"id"`
	Email     string  `json:"email"`
	Role      string  `json:"role"`
	AccountID string  `json:"account_id"`
	ProjectID string  `json:"project_id"`
	CreatedAt *string `json:"created_at"`
}

func memberJSON(m *accountingv1.Member) Member {
	return Member{ID: m.GetId(), Email: m.GetEmail(), Role: m.GetRole(), AccountID: m.GetAccountId(),
		ProjectID: m.GetProjectId(), CreatedAt: timeOrNil(m.GetCreatedAt())}
}

func memberAdd(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	email, err := required(p, "member add", "email", "E")
	if err != nil {
		return nil, err
	}
	role, err := required(p, "member add", "role", "admin|operator|billing|viewer|member")
	if err != nil {
		return nil, err
	}
	resp, err := c.AddMember(ctx, &accountingv1.AddMemberRequest{Email: email, Role: role,
		AccountId: strings.TrimSpace(p.flags["account"]), ProjectId: strings.TrimSpace(p.flags["project"])})
	if err != nil {
		return nil, err
	}
	return memberJSON(resp.GetMember()), nil
}

func memberList(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	resp, err := c.ListMembers(ctx, &accountingv1.ListMembersRequest{AccountId: strings.TrimSpace(p.flags["account"])})
	if err != nil {
		return nil, err
	}
	out := struct {
		Members []Member `json:"members"`
	}{Members: []Member{}}
	for _, m := range resp.GetMembers() {
		out.Members = append(out.Members, memberJSON(m))
	}
	return out, nil
}

func memberRemove(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	resp, err := c.RemoveMember(ctx, &accountingv1.RemoveMemberRequest{MemberId: p.args[0]})
	if err != nil {
		return nil, err
	}
	return memberJSON(resp.GetMember()), nil
}
