package app

import (
	"context"
	"io"
	"net"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/llmgw/gateway/accounting/authn"
	"github.com/llmgw/gateway/accounting/server"
	"github.com/llmgw/gateway/accounting/server/servertest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestEveryMethodNeedsItsRole calls every method of both services, unary and streaming,
// over a real gRPC server built with the process's interceptors: without a token, with
// an unknown one and with the service token on AdminService the answer is
// Unauthenticated and the handler never runs; the admin token passes everywhere and the
// service token on LedgerService. The methods come from the generated service
// descriptions, so a method added later is covered without editing this test.
func TestEveryMethodNeedsItsRole(t *testing.T) {
	az, err := authn.NewSetAuthorizer(authn.TokenSets{Service: []string{svcOld}, Admin: []string{admOld}})
	if err != nil {
		t.Fatal(err)
	}
	st := servertest.NewMemory()
	hub := server.NewHub(st, zap.NewNop(), 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go hub.Run(ctx)
	gs := grpc.NewServer(az.ServerOptions()...)
	server.New(st, hub, server.Options{}).Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()

	type method struct {
		name   string
		stream bool
		admin  bool
	}
	var methods []method
	for _, d := range []grpc.ServiceDesc{accountingv1.LedgerService_ServiceDesc, accountingv1.AdminService_ServiceDesc} {
		admin := d.ServiceName == accountingv1.AdminService_ServiceDesc.ServiceName
		for _, m := range d.Methods {
			methods = append(methods, method{"/" + d.ServiceName + "/" + m.MethodName, false, admin})
		}
		for _, s := range d.Streams {
			methods = append(methods, method{"/" + d.ServiceName + "/" + s.StreamName, true, admin})
		}
	}
	if len(methods) < 10 {
		t.Fatalf("only %d methods found", len(methods))
	}
	call := func(ctx context.Context, m method) error {
		if !m.stream {
			return conn.Invoke(ctx, m.name, &emptypb.Empty{}, &emptypb.Empty{})
		}
		cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, m.name)
		if err != nil {
			return err
		}
		if err := cs.SendMsg(&emptypb.Empty{}); err != nil && err != io.EOF {
			return err
		}
		if err := cs.CloseSend(); err != nil {
			return err
		}
		return cs.RecvMsg(&emptypb.Empty{})
	}
	for _, m := range methods {
		for _, tc := range []struct {
			name, token string
			allowed     bool
		}{
			{name: "no token"},
			{name: "unknown token", token: "someone-elses-token-0123456789"},
			{name: "service token", token: svcOld, allowed: !m.admin},
			{name: "admin token", token: admOld, allowed: true},
		} {
			t.Run(m.name+"/"+tc.name, func(t *testing.T) {
				cctx, ccancel := context.WithCancel(context.Background())
				defer ccancel()
				if tc.token != "" {
					cctx = metadata.AppendToOutgoingContext(cctx, "authorization", "Bearer "+tc.token)
				}
				err := call(cctx, m)
				got := status.Code(err)
				if tc.allowed && got == codes.Unauthenticated {
					t.Fatalf("refused: %v", err)
				}
				if !tc.allowed && (got != codes.Unauthenticated || status.Convert(err).Message() != "unauthenticated") {
					t.Fatalf("answer %v, want the one unauthenticated refusal", err)
				}
			})
		}
	}
}
