package server

import (
	"context"
	"net/url"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/llmgw/gateway/accounting/access"
	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Authorization of the calls made for a person. A caller that signs people in
// itself (the console) sends client.PersonMetadata beside its credential. The
// credential interceptor (authn) runs first and admits AdminService calls only with
// the admin credential, so a person is only ever named by a caller holding it.
// A call that names a person is authorized by that person's memberships (access.
// Decide) before its handler runs, and its listings are cut to the person's scope
// after; a call that names none (gatewayctl, break-glass with the admin token) keeps
// every right.

var adminPrefix = "/" + accountingv1.AdminService_ServiceDesc.ServiceName + "/"

// errNoMembership answers every call of a person with no membership.
var errNoMembership = status.Error(codes.PermissionDenied, "you have no membership")

// errForbidden answers a call whose target the person sees but may not act on.
var errForbidden = status.Error(codes.PermissionDenied, "your role may not do this")

// personOf returns the person a call is made for, "" when it names none.
func personOf(ctx context.Context) (string, bool) {
	v := metadata.ValueFromIncomingContext(ctx, client.PersonMetadata) // every call: no copy of the rest
	if len(v) == 0 {
		return "", false
	}
	p, err := url.QueryUnescape(v[0])
	if err != nil {
		return "", true // named, unreadable: no membership matches
	}
	return strings.ToLower(strings.TrimSpace(p)), true
}

// Authorize is the unary interceptor of the AdminService: it authorizes the calls
// made for a person, and records every change in the audit log (audit.go). Install
// it after the credential interceptor.
func (s *Server) Authorize() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		person, named := personOf(ctx)
		if !strings.HasPrefix(info.FullMethod, adminPrefix) {
			if named {
				return nil, errNoMembership
			}
			return handler(ctx, req)
		}
		sc := &scope{s: s, paths: map[string][]string{}}
		var ms []access.Membership
		if named {
			var err error
			if ms, err = s.membershipsOf(ctx, person); err != nil {
				return nil, err
			}
		}
		checks, err := sc.checks(ctx, req)
		if err != nil && !named {
			// The handler answers for what it cannot find; no change, nothing to record.
			return handler(ctx, req)
		}
		if err != nil {
			return nil, s.fail(ctx, info.FullMethod, err)
		}
		if named {
			if err := s.decide(ctx, ms, checks); err != nil {
				return nil, err
			}
		}
		var note *ledger.AuditNote
		if s.audit != nil && len(checks) > 0 && changes(checks[0].action, req) {
			note = s.auditNote(ctx, person, named, checks[0], req)
			ctx = ledger.WithAudit(ctx, note)
		}
		resp, err := handler(ctx, req)
		if err != nil {
			return nil, err
		}
		if note != nil && !note.Taken() {
			// A store that keeps no audit log made the change (none in accounting).
			s.log.Error("audit entry not recorded with its change", zap.String("method", info.FullMethod))
		}
		if named {
			if err := sc.filter(ctx, ms, resp); err != nil {
				return nil, s.fail(ctx, info.FullMethod, err)
			}
		}
		return resp, nil
	}
}

// decide answers the checks of a call for a person with memberships ms: nil when
// allowed, else the status to answer (the same NotFound as for an id that does not
// exist). A call without checks (a method the table does not name) is nobody's.
func (s *Server) decide(ctx context.Context, ms []access.Membership, checks []check) error {
	if len(checks) == 0 {
		return errForbidden
	}
	for _, c := range checks {
		switch access.Decide(ms, c.action, c.target) {
		case access.Hidden:
			return s.fail(ctx, "decide", ledger.ErrNotFound)
		case access.Forbidden:
			return errForbidden
		}
	}
	return nil
}

// membershipsOf returns a person's memberships; errNoMembership when none.
func (s *Server) membershipsOf(ctx context.Context, person string) ([]access.Membership, error) {
	if s.members == nil || person == "" {
		return nil, errNoMembership
	}
	rows, err := s.members.MembershipsOf(ctx, person)
	if err != nil {
		return nil, s.fail(ctx, "MembershipsOf", err)
	}
	if len(rows) == 0 {
		return nil, errNoMembership
	}
	ms := make([]access.Membership, 0, len(rows))
	for _, m := range rows {
		ms = append(ms, access.Membership{Role: access.Role(m.Role), Account: m.AccountID, Project: m.ProjectID})
	}
	return ms, nil
}

// isNotFound reports a missing row, as the store or the engine says it.
func isNotFound(err error) bool {
	st, ok := contract.RefusalStatus(err)
	return ok && status.Code(st) == codes.NotFound
}

// check is one decision a call needs.
type check struct {
	action access.Action
	target access.Target
}

// scope resolves targets: an account, a key (its account and project path), a
// project (its ancestry).
type scope struct {
	s     *Server
	paths map[string][]string // project id -> itself and its ancestors, nearest first
}

// projectPath returns a project's account and path; ErrNotFound when unknown.
func (sc *scope) projectPath(ctx context.Context, id string) (string, []string, error) {
	var account string
	var path []string
	for cur := id; cur != "" && len(path) <= ledger.MaxProjectLevels; {
		p, err := sc.s.store.GetProject(ctx, cur)
		if err != nil {
			return "", nil, err
		}
		account = p.AccountID
		path = append(path, p.ID)
		cur = p.ParentID
	}
	return account, path, nil
}

// inProject is the target of something of account in project (none: the account).
func (sc *scope) inProject(ctx context.Context, account, project string) (access.Target, error) {
	if project == "" {
		return access.Target{Account: account}, nil
	}
	pa, path, err := sc.projectPath(ctx, project)
	if err != nil {
		return access.Target{}, err
	}
	if account != "" && pa != account {
		// A project of another account: decided as the named account itself.
		return access.Target{Account: account}, nil
	}
	return access.Target{Account: pa, Projects: path}, nil
}

func (sc *scope) key(ctx context.Context, id string) (access.Target, error) {
	k, err := sc.s.store.GetKey(ctx, id)
	if err != nil {
		return access.Target{}, err
	}
	return sc.inProject(ctx, k.AccountID, k.ProjectID)
}

func (sc *scope) project(ctx context.Context, id string) (access.Target, error) {
	return sc.inProject(ctx, "", id)
}

// webhook is the check of a call naming a webhook alone: the webhooks of its account,
// so that an admin scoped to the account may test, inspect and delete them, and a
// webhook outside the scope answers as one that does not exist.
func (sc *scope) webhook(ctx context.Context, id string) ([]check, error) {
	if sc.s.hooks == nil {
		return nil, nil
	}
	h, err := sc.s.hooks.GetWebhook(ctx, id)
	if err != nil {
		return nil, err
	}
	return one(access.Webhooks, access.Target{Account: h.AccountID}), nil
}

func one(a access.Action, t access.Target) []check { return []check{{a, t}} }

// checks are the decisions a call needs for req: the one table of the admin API's
// methods. A method missing here is refused to every person.
func (sc *scope) checks(ctx context.Context, req any) ([]check, error) {
	acct := func(id string) access.Target { return access.Target{Account: id} }
	withT := func(a access.Action, t access.Target, err error) ([]check, error) {
		if err != nil {
			return nil, err
		}
		return one(a, t), nil
	}
	switch r := req.(type) {
	case *accountingv1.ListTiersRequest:
		return one(access.ListTiers, access.Target{}), nil
	case *accountingv1.SetTierRequest:
		return one(access.SetTier, access.Target{}), nil
	case *accountingv1.ListAccountsRequest:
		return one(access.ListAccounts, access.Target{}), nil
	case *accountingv1.CreateAccountRequest:
		return one(access.CreateAccount, access.Target{}), nil
	case *accountingv1.ReconcileRequest:
		return one(access.Reconcile, access.Target{}), nil
	case *accountingv1.GetAccountRequest:
		return one(access.GetAccount, acct(r.GetAccountId())), nil
	case *accountingv1.UpdateAccountRequest:
		return one(access.UpdateAccount, acct(r.GetAccountId())), nil
	case *accountingv1.SetAccountSuspendedRequest:
		return one(access.SuspendAcct, acct(r.GetAccountId())), nil
	case *accountingv1.TopUpRequest:
		return one(access.TopUp, acct(r.GetAccountId())), nil
	case *accountingv1.ListLedgerEntriesRequest:
		return one(access.Statement, acct(r.GetAccountId())), nil
	case *accountingv1.ListKeysRequest:
		return one(access.ListKeys, acct(r.GetAccountId())), nil
	case *accountingv1.ListProjectsRequest:
		return one(access.ListProjects, acct(r.GetAccountId())), nil
	case *accountingv1.GetUsageRequest:
		if r.GetKeyId() != "" {
			t, err := sc.key(ctx, r.GetKeyId())
			if err == nil && t.Account != r.GetAccountId() {
				t = acct(r.GetAccountId())
			}
			return withT(access.Usage, t, err)
		}
		t, err := sc.inProject(ctx, r.GetAccountId(), r.GetProjectId())
		return withT(access.Usage, t, err)
	case *accountingv1.CreateKeyRequest:
		t, err := sc.inProject(ctx, r.GetAccountId(), r.GetProjectId())
		return withT(access.CreateKey, t, err)
	case *accountingv1.GetKeyRequest:
		t, err := sc.key(ctx, r.GetKeyId())
		return withT(access.GetKey, t, err)
	case *accountingv1.SetKeyDisabledRequest:
		a := access.EnableKey
		if r.GetDisabled() {
			a = access.DisableKey
		}
		t, err := sc.key(ctx, r.GetKeyId())
		return withT(a, t, err)
	case *accountingv1.RevokeKeyRequest:
		t, err := sc.key(ctx, r.GetKeyId())
		return withT(access.RevokeKey, t, err)
	case *accountingv1.UpdateKeyRequest:
		t, err := sc.key(ctx, r.GetKeyId())
		cs, err := withT(access.UpdateKey, t, err)
		if err != nil || r.ProjectId == nil {
			return cs, err
		}
		// A move needs the right where the key goes too.
		to, err := sc.inProject(ctx, t.Account, r.GetProjectId())
		return append(cs, check{access.UpdateKey, to}), err
	case *accountingv1.GetProjectRequest:
		t, err := sc.project(ctx, r.GetProjectId())
		return withT(access.GetProject, t, err)
	case *accountingv1.CreateProjectRequest:
		t, err := sc.inProject(ctx, r.GetAccountId(), r.GetParentId())
		return withT(access.CreateProject, t, err)
	case *accountingv1.UpdateProjectRequest:
		t, err := sc.project(ctx, r.GetProjectId())
		return withT(access.UpdateProject, t, err)
	case *accountingv1.DeleteProjectRequest:
		t, err := sc.project(ctx, r.GetProjectId())
		return withT(access.DeleteProject, t, err)
	case *accountingv1.CreateWebhookRequest:
		return one(access.Webhooks, acct(r.GetAccountId())), nil
	case *accountingv1.ListWebhooksRequest:
		return one(access.Webhooks, acct(r.GetAccountId())), nil
	case *accountingv1.DeleteWebhookRequest:
		return sc.webhook(ctx, r.GetWebhookId())
	case *accountingv1.TestWebhookRequest:
		return sc.webhook(ctx, r.GetWebhookId())
	case *accountingv1.ListWebhookDeliveriesRequest:
		return sc.webhook(ctx, r.GetWebhookId())
	case *accountingv1.ListMembersRequest:
		return one(access.ListMembers, access.Target{}), nil
	case *accountingv1.AddMemberRequest:
		t, err := sc.inProject(ctx, r.GetAccountId(), r.GetProjectId())
		return withT(access.AddMember, t, err)
	case *accountingv1.CheckAccessRequest:
		// Asked by anyone with a membership; the handler decides the call it names.
		return one(access.ListTiers, access.Target{}), nil
	case *accountingv1.ListAuditRequest:
		if r.GetAccountId() == "" {
			return one(access.ListAudit, access.Target{}), nil
		}
		return one(access.ListAudit, acct(r.GetAccountId())), nil
	case *accountingv1.RemoveMemberRequest:
		if sc.s.members == nil {
			return nil, nil
		}
		m, err := sc.s.members.GetMember(ctx, r.GetMemberId())
		if err != nil {
			return nil, err
		}
		t, err := sc.inProject(ctx, m.AccountID, m.ProjectID)
		return withT(access.RemoveMember, t, err)
	}
	return nil, nil
}

// filter cuts a listing's answer to what ms shows.
func (sc *scope) filter(ctx context.Context, ms []access.Membership, resp any) error {
	switch r := resp.(type) {
	case *accountingv1.ListAccountsResponse:
		r.Accounts = keep(r.Accounts, func(a *accountingv1.Account) (access.Target, error) {
			return access.Target{Account: a.GetId()}, nil
		}, ms, access.ListAccounts)
	case *accountingv1.ListKeysResponse:
		var err error
		r.Keys, err = keepErr(r.Keys, func(k *accountingv1.Key) (access.Target, error) {
			return sc.cachedIn(ctx, k.GetAccountId(), k.GetProjectId())
		}, ms, access.ListKeys)
		return err
	case *accountingv1.ListProjectsResponse:
		var err error
		r.Projects, err = keepErr(r.Projects, func(p *accountingv1.Project) (access.Target, error) {
			return sc.cachedIn(ctx, p.GetAccountId(), p.GetId())
		}, ms, access.ListProjects)
		return err
	case *accountingv1.ListMembersResponse:
		var err error
		r.Members, err = keepErr(r.Members, func(m *accountingv1.Member) (access.Target, error) {
			return sc.cachedIn(ctx, m.GetAccountId(), m.GetProjectId())
		}, ms, access.ListMembers)
		return err
	}
	return nil
}

// cachedIn is inProject with each project's path looked up once per call; a project
// gone meanwhile places the item at its account.
func (sc *scope) cachedIn(ctx context.Context, account, project string) (access.Target, error) {
	if project == "" {
		return access.Target{Account: account}, nil
	}
	if path, ok := sc.paths[project]; ok {
		return access.Target{Account: account, Projects: path}, nil
	}
	t, err := sc.inProject(ctx, account, project)
	if isNotFound(err) {
		t, err = access.Target{Account: account}, nil
	}
	if err != nil {
		return access.Target{}, err
	}
	sc.paths[project] = t.Projects
	return t, nil
}

func keep[T proto.Message](items []T, target func(T) (access.Target, error), ms []access.Membership, a access.Action) []T {
	out, _ := keepErr(items, target, ms, a)
	return out
}

func keepErr[T proto.Message](items []T, target func(T) (access.Target, error), ms []access.Membership, a access.Action) ([]T, error) {
	out := items[:0]
	for _, it := range items {
		t, err := target(it)
		if err != nil {
			return nil, err
		}
		if access.Shows(ms, a, t) {
			out = append(out, it)
		}
	}
	return out, nil
}
