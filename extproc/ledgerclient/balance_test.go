package ledgerclient

import (
	"context"
	"net"
	"testing"
	"time"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// TestDialOptionsSpreadCalls: with DialOptions, a target that resolves to two replicas
// (as dns:///accounting-headless does) gets calls on both, not only the first.
func TestDialOptionsSpreadCalls(t *testing.T) {
	var replicas [2]*fakeLedger
	addrs := make([]resolver.Address, len(replicas))
	for i := range replicas {
		replicas[i] = &fakeLedger{}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gs := grpc.NewServer()
		accountingv1.RegisterLedgerServiceServer(gs, replicas[i])
		go func() { _ = gs.Serve(lis) }()
		t.Cleanup(gs.Stop)
		addrs[i] = resolver.Address{Addr: lis.Addr().String()}
	}
	r := manual.NewBuilderWithScheme("replicas")
	r.InitialState(resolver.State{Addresses: addrs})
	opts := append(DialOptions(false), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(r))
	conn, err := grpc.NewClient("replicas:///accounting", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rpc := accountingv1.NewLedgerServiceClient(conn)
	calls := func(f *fakeLedger) int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.auths
	}
	// Round robin uses a replica once its connection is ready: call until both served
	// one (pick_first never would), within a generous deadline.
	deadline := time.Now().Add(10 * time.Second)
	for calls(replicas[0]) == 0 || calls(replicas[1]) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("calls per replica: %d, %d (calls are not spread)", calls(replicas[0]), calls(replicas[1]))
		}
		// A fresh client each time: no cache in front of the calls.
		_, _ = New(rpc, Options{}).Authenticate(context.Background(), []byte("0123456789abcdef0123456789abcdef"))
	}
}
