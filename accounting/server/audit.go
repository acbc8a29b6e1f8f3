package server

import (
	"context"
	"encoding/json"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/llmgw/gateway/accounting/access"
	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// The audit log: every change made through the AdminService, recorded by Authorize
// right after the change is decided, with who made it (the person, or
// "admin-token"), how (client.ViaMetadata), and the record before and after as the
// AdminService shows it, without its secret. Kept by Options.Audit; nil records
// nothing.

// changes reports whether a call of action with req changes something.
func changes(a access.Action, req any) bool {
	switch req.(type) {
	case *accountingv1.ListWebhooksRequest, *accountingv1.ListWebhookDeliveriesRequest:
		return false
	}
	return !access.Reads(a)
}

// recordOf is the record a request or an answer carries (an account, a key, a
// project, a member, a tier, a webhook) as JSON without a secret; nil when none.
func recordOf(m proto.Message) []byte {
	if m == nil {
		return nil
	}
	var rec proto.Message
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() {
			rec = proto.Clone(v.Message().Interface())
			return false
		}
		return true
	})
	if rec == nil {
		return nil
	}
	if h, ok := rec.(*accountingv1.Webhook); ok {
		h.Secret = ""
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(rec)
	if err != nil {
		return nil
	}
	// protojson's spacing is not stable; the stored form is compact JSON.
	var v any
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	b, _ = json.Marshal(v)
	return b
}

// subjectOf names what a change is about: its record's id (a tier: its name), else
// the id its request names.
func subjectOf(req, resp proto.Message) string {
	for _, m := range []proto.Message{resp, req} {
		if m == nil {
			continue
		}
		var id string
		m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() {
				r := v.Message()
				for _, name := range []protoreflect.Name{"id", "name"} {
					if f := r.Descriptor().Fields().ByName(name); f != nil && r.Get(f).String() != "" {
						id = r.Get(f).String()
						return false
					}
				}
			}
			return true
		})
		if id != "" {
			return id
		}
	}
	for _, name := range []protoreflect.Name{"key_id", "member_id", "webhook_id", "project_id", "account_id"} {
		r := req.ProtoReflect()
		if f := r.Descriptor().Fields().ByName(name); f != nil && r.Get(f).String() != "" {
			return r.Get(f).String()
		}
	}
	return ""
}

// before reads the record a change is about as it is before the change; nil when
// it is new or cannot be read.
func (sc *scope) before(ctx context.Context, req any) []byte {
	var m proto.Message
	switch r := req.(type) {
	case *accountingv1.UpdateAccountRequest, *accountingv1.SetAccountSuspendedRequest, *accountingv1.TopUpRequest:
		id := r.(interface{ GetAccountId() string }).GetAccountId()
		if acc, err := sc.s.store.GetAccount(ctx, id); err == nil {
			m = &accountingv1.GetAccountResponse{Account: contract.AccountToProto(acc)}
		}
	case *accountingv1.UpdateKeyRequest, *accountingv1.SetKeyDisabledRequest, *accountingv1.RevokeKeyRequest:
		if k, err := sc.s.store.GetKey(ctx, r.(interface{ GetKeyId() string }).GetKeyId()); err == nil {
			m = &accountingv1.GetKeyResponse{Key: contract.KeyToProto(k)}
		}
	case *accountingv1.UpdateProjectRequest, *accountingv1.DeleteProjectRequest:
		if p, err := sc.s.store.GetProject(ctx, r.(interface{ GetProjectId() string }).GetProjectId()); err == nil {
			m = &accountingv1.GetProjectResponse{Project: contract.ProjectToProto(p)}
		}
	case *accountingv1.RemoveMemberRequest:
		if sc.s.members != nil {
			if mb, err := sc.s.members.GetMember(ctx, r.GetMemberId()); err == nil {
				m = &accountingv1.RemoveMemberResponse{Member: memberToProto(mb)}
			}
		}
	case *accountingv1.SetTierRequest:
		if tiers, err := sc.s.store.Tiers(ctx); err == nil {
			for _, t := range tiers {
				if t.Name == r.GetTier().GetName() {
					m = &accountingv1.SetTierResponse{Tier: contract.TierToProto(t)}
				}
			}
		}
	}
	return recordOf(m)
}

// viaOf says how a call came: "console" for a person, else what the caller says
// (gatewayctl), else "api".
func viaOf(ctx context.Context, named bool) string {
	if named {
		return "console"
	}
	if v := metadata.ValueFromIncomingContext(ctx, client.ViaMetadata); len(v) > 0 && v[0] == "gatewayctl" {
		return "gatewayctl"
	}
	return "api"
}

// record writes one change to the audit log. The change is made: a failure to record
// it is logged, and the caller still gets its answer.
func (s *Server) record(ctx context.Context, person string, named bool, c check, req any, before []byte, resp any) {
	if s.audit == nil {
		return
	}
	actor := "admin-token"
	if named {
		actor = person
	}
	rq, _ := req.(proto.Message)
	rs, _ := resp.(proto.Message)
	account := c.target.Account
	if account == "" {
		if a, ok := rs.(*accountingv1.CreateAccountResponse); ok {
			account = a.GetAccount().GetId()
		}
	}
	e := ledger.AuditEntry{Actor: actor, Via: viaOf(ctx, named), Action: string(c.action), Target: subjectOf(rq, rs),
		AccountID: account, Before: before, After: recordOf(rs)}
	if _, ok := rq.(*accountingv1.RemoveMemberRequest); ok {
		e.After = nil // gone
	}
	if err := s.audit.RecordAudit(context.WithoutCancel(ctx), e); err != nil {
		s.log.Error("audit entry not recorded", zap.String("action", e.Action), zap.String("target", e.Target), zap.Error(err))
	}
}

// ListAudit returns the audit log, newest first.
func (a *AdminServer) ListAudit(ctx context.Context, req *accountingv1.ListAuditRequest) (*accountingv1.ListAuditResponse, error) {
	if a.s.audit == nil {
		return nil, status.Error(codes.Unimplemented, "this accounting keeps no audit log")
	}
	if req.GetBeforeId() < 0 {
		return nil, invalidArgument("before_id must not be negative")
	}
	limit, err := pageSize(req.GetLimit())
	if err != nil {
		return nil, err
	}
	es, err := a.s.audit.ListAudit(ctx, ledger.AuditQuery{AccountID: req.GetAccountId(), Actor: req.GetActor(),
		BeforeID: req.GetBeforeId(), Limit: limit + 1})
	if err != nil {
		return nil, a.s.fail(ctx, "ListAudit", err)
	}
	resp := &accountingv1.ListAuditResponse{}
	resp.Entries = pageOf(es, limit, func(e ledger.AuditEntry) *accountingv1.AuditEntry {
		return &accountingv1.AuditEntry{Id: e.ID, At: contract.Timestamp(e.At), Actor: e.Actor, Via: e.Via, Action: e.Action,
			Target: e.Target, AccountId: e.AccountID, BeforeJson: string(e.Before), AfterJson: string(e.After)}
	}, func(last ledger.AuditEntry) { resp.NextBeforeId = last.ID })
	return resp, nil
}
