package server

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/access"
	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// The members: who may do what in the admin API, kept by Options.Members.

func (a *AdminServer) members() (ledger.Members, error) {
	if a.s.members == nil {
		return nil, status.Error(codes.Unimplemented, "this accounting keeps no members")
	}
	return a.s.members, nil
}

func memberToProto(m ledger.Member) *accountingv1.Member {
	return &accountingv1.Member{Id: m.ID, Email: m.Email, Role: m.Role, AccountId: m.AccountID, ProjectId: m.ProjectID,
		CreatedAt: contract.Timestamp(m.CreatedAt)}
}

// AddMember gives a person a role over a scope; a project alone names its account.
func (a *AdminServer) AddMember(ctx context.Context, req *accountingv1.AddMemberRequest) (*accountingv1.AddMemberResponse, error) {
	ms, err := a.members()
	if err != nil {
		return nil, err
	}
	email := strings.ToLower(strings.TrimSpace(req.GetEmail()))
	if email == "" || !strings.Contains(email, "@") {
		return nil, invalidArgument("email must be an email address")
	}
	m := access.Membership{Role: access.Role(req.GetRole()), Account: req.GetAccountId(), Project: req.GetProjectId()}
	if m.Project != "" {
		p, err := a.s.store.GetProject(ctx, m.Project)
		if err != nil {
			return nil, a.s.fail(ctx, "AddMember", err)
		}
		if m.Account != "" && m.Account != p.AccountID {
			return nil, invalidArgument("the project is not of that account")
		}
		m.Account = p.AccountID
	} else if m.Account != "" {
		if _, err := a.s.store.GetAccount(ctx, m.Account); err != nil {
			return nil, a.s.fail(ctx, "AddMember", err)
		}
	}
	if err := m.Validate(); err != nil {
		return nil, invalidArgument(err.Error())
	}
	added, err := ms.AddMember(ctx, ledger.Member{Email: email, Role: string(m.Role), AccountID: m.Account, ProjectID: m.Project})
	if err != nil {
		return nil, a.s.fail(ctx, "AddMember", err)
	}
	return &accountingv1.AddMemberResponse{Member: memberToProto(added)}, nil
}

// ListMembers returns every member, or an account's.
func (a *AdminServer) ListMembers(ctx context.Context, req *accountingv1.ListMembersRequest) (*accountingv1.ListMembersResponse, error) {
	ms, err := a.members()
	if err != nil {
		return nil, err
	}
	list, err := ms.ListMembers(ctx, req.GetAccountId())
	if err != nil {
		return nil, a.s.fail(ctx, "ListMembers", err)
	}
	resp := &accountingv1.ListMembersResponse{Members: make([]*accountingv1.Member, 0, len(list))}
	for _, m := range list {
		resp.Members = append(resp.Members, memberToProto(m))
	}
	return resp, nil
}

// RemoveMember takes one role away.
func (a *AdminServer) RemoveMember(ctx context.Context, req *accountingv1.RemoveMemberRequest) (*accountingv1.RemoveMemberResponse, error) {
	ms, err := a.members()
	if err != nil {
		return nil, err
	}
	if req.GetMemberId() == "" {
		return nil, invalidArgument("member_id is required")
	}
	m, err := ms.RemoveMember(ctx, req.GetMemberId())
	if err != nil {
		return nil, a.s.fail(ctx, "RemoveMember", err)
	}
	return &accountingv1.RemoveMemberResponse{Member: memberToProto(m)}, nil
}
