package server

import (
	"context"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// CheckAccess decides the call it names for the person this call is made for, by
// the same table as the call itself (scope.checks), without making it.
func (a *AdminServer) CheckAccess(ctx context.Context, req *accountingv1.CheckAccessRequest) (*accountingv1.CheckAccessResponse, error) {
	svc := accountingv1.File_accounting_v1_accounting_proto.Services().ByName("AdminService")
	md := svc.Methods().ByName(protoreflect.Name(req.GetMethod()))
	if md == nil || md.Name() == "CheckAccess" {
		return nil, invalidArgument("method must name an AdminService method")
	}
	person, named := personOf(ctx)
	if !named {
		return &accountingv1.CheckAccessResponse{}, nil
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return nil, a.s.fail(ctx, "CheckAccess", err)
	}
	call := mt.New()
	set := func(name protoreflect.Name, v protoreflect.Value) {
		if f := call.Descriptor().Fields().ByName(name); f != nil {
			call.Set(f, v)
		}
	}
	for name, v := range map[protoreflect.Name]string{"account_id": req.GetAccountId(), "key_id": req.GetKeyId(), "project_id": req.GetProjectId()} {
		if v != "" {
			set(name, protoreflect.ValueOfString(v))
		}
	}
	if req.GetDisabled() {
		set("disabled", protoreflect.ValueOfBool(true))
	}
	ms, err := a.s.membershipsOf(ctx, person)
	if err != nil {
		return nil, err
	}
	sc := &scope{s: a.s, paths: map[string][]string{}}
	checks, err := sc.checks(ctx, call.Interface())
	if err != nil {
		return nil, a.s.fail(ctx, "CheckAccess", err)
	}
	if err := a.s.decide(ctx, ms, checks); err != nil {
		return nil, err
	}
	return &accountingv1.CheckAccessResponse{}, nil
}
