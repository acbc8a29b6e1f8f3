package authn

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// The credential check runs on every call: it reads the one header it needs rather
// than a copy of the call's whole metadata (a map and a slice per header).
func TestCheckReadsOnlyTheAuthorizationHeader(t *testing.T) {
	tok := strings.Repeat("s", 32)
	a, err := NewAuthorizer(Tokens{Service: tok, Admin: strings.Repeat("a", 32)})
	if err != nil {
		t.Fatal(err)
	}
	// The headers a ledger call from extproc carries, as gRPC hands them over.
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(
		"authorization", "Bearer "+tok, ":authority", "accounting:9090", "content-type", "application/grpc",
		"user-agent", "grpc-go/1.85.0", "x-ledger-redirect", "1", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"grpc-timeout", "2999m", "te", "trailers"))
	method := accountingv1.LedgerService_Reserve_FullMethodName
	if err := a.check(ctx, method); err != nil {
		t.Fatalf("the service token is refused: %v", err)
	}
	ic := a.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: method}
	ok := func(context.Context, any) (any, error) { return nil, nil }
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := ic(ctx, nil, info, ok); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("a credential check makes %.0f allocations, want at most 2 (no copy of the metadata)", allocs)
	}
}
