package server

import (
	"context"
	"encoding/json"

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

// The audit log: every change made through the AdminService is recorded in the same
// decision as the change itself. Authorize hands the handler a ledger.AuditNote in
// its context, with who makes the change (the person, or "admin-token"), how
// (client.ViaMetadata) and the action; the store that makes the change takes it and
// records the entry with the change: the ledger's owner in the journal batch of the
// change, the members' and the webhooks' tables in the change's transaction. The
// records before and after are rendered here, as the AdminService shows them, without
// their secret. Kept by Options.Audit; nil records nothing.

// changes reports whether a call of action with req changes something.
func changes(a access.Action, req any) bool {
	switch req.(type) {
	case *accountingv1.ListWebhooksRequest, *accountingv1.ListWebhookDeliveriesRequest:
		return false
	}
	return !access.Reads(a)
}

// auditNote is the note a change of check c with req is recorded with.
func (s *Server) auditNote(ctx context.Context, person string, named bool, c check, req any) *ledger.AuditNote {
	actor := "admin-token"
	if named {
		actor = person
	}
	rq, _ := req.(proto.Message)
	return &ledger.AuditNote{Actor: actor, Via: viaOf(ctx, named), Action: string(c.action),
		Record: func(rec any) json.RawMessage { return jsonOf(messageOf(rec)) },
		Subject: func(rec any) (string, string) {
			account := c.target.Account
			if account == "" {
				account = accountOf(rec)
			}
			return subjectOf(rq, messageOf(rec)), account
		}}
}

// messageOf is a record a store holds as the AdminService shows it; nil for none.
func messageOf(rec any) proto.Message {
	switch r := rec.(type) {
	case ledger.Account:
		return contract.AccountToProto(r)
	case ledger.Key:
		return contract.KeyToProto(r)
	case ledger.Project:
		return contract.ProjectToProto(r)
	case ledger.Tier:
		return contract.TierToProto(r)
	case ledger.Member:
		return memberToProto(r)
	case ledger.Webhook:
		h := webhookToProto(r)
		h.Secret = ""
		return h
	}
	return nil
}

// accountOf is the account a record is of ("" for a tier).
func accountOf(rec any) string {
	switch r := rec.(type) {
	case ledger.Account:
		return r.ID
	case ledger.Key:
		return r.AccountID
	case ledger.Project:
		return r.AccountID
	case ledger.Member:
		return r.AccountID
	case ledger.Webhook:
		return r.AccountID
	}
	return ""
}

// jsonOf is m as compact JSON; nil when m is.
func jsonOf(m proto.Message) []byte {
	if m == nil {
		return nil
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
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
func subjectOf(req, rec proto.Message) string {
	if rec != nil {
		r := rec.ProtoReflect()
		for _, name := range []protoreflect.Name{"id", "name"} {
			if f := r.Descriptor().Fields().ByName(name); f != nil && r.Get(f).String() != "" {
				return r.Get(f).String()
			}
		}
	}
	if req == nil {
		return ""
	}
	for _, name := range []protoreflect.Name{"key_id", "member_id", "webhook_id", "project_id", "account_id"} {
		r := req.ProtoReflect()
		if f := r.Descriptor().Fields().ByName(name); f != nil && r.Get(f).String() != "" {
			return r.Get(f).String()
		}
	}
	return ""
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
