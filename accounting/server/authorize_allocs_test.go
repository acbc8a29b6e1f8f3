package server_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/llmgw/gateway/accounting/server"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// A ledger call (extproc's, on every request) passes the authorization interceptor
// without a copy of its metadata: it only looks for the person header, which it lacks.
func TestAuthorizePassesLedgerCallsWithoutCopies(t *testing.T) {
	az := server.New(nil, nil, server.Options{}).Authorize()
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(
		"authorization", "Bearer service-token", ":authority", "accounting:9090", "content-type", "application/grpc",
		"user-agent", "grpc-go/1.85.0", "x-ledger-redirect", "1", "grpc-timeout", "2999m", "te", "trailers"))
	info := &grpc.UnaryServerInfo{FullMethod: accountingv1.LedgerService_Reserve_FullMethodName}
	called := 0
	handler := func(context.Context, any) (any, error) { called++; return nil, nil }
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := az(ctx, nil, info, handler); err != nil {
			t.Fatal(err)
		}
	})
	if called == 0 {
		t.Fatal("the handler was not called")
	}
	if allocs > 0 {
		t.Errorf("a ledger call allocates %.0f times in the authorization interceptor, want none", allocs)
	}
}
