package servertest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/llmgw/gateway/accounting/authn"
	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Tokens a Fixture accepts.
const (
	ServiceToken = "test-service-token-0123456789"
	AdminToken   = "test-admin-token-0123456789"
)

// Fixture is the accounting gRPC API serving a store on a loopback port, with the
// credential interceptors in place.
type Fixture struct {
	Addr  string
	Store ledger.Store
	Hub   *server.Hub
}

// Options tune Start.
type Options struct {
	Logger *zap.Logger
	// SubscriberBuffer is the hub's per-watcher buffer; 0 means the default.
	SubscriberBuffer int
	// Now is the server's clock; nil means time.Now.
	Now func() time.Time
	// ServerOptions are added to the gRPC server's (after the credential interceptors).
	ServerOptions []grpc.ServerOption
	// Observe is the server's server.Options.Observe.
	Observe func(method string, err error, elapsed time.Duration)
	// Webhooks is the server's server.Options.Webhooks.
	Webhooks ledger.Webhooks
	// Members is the server's server.Options.Members; the server authorizes the calls
	// made for a person (server.Authorize) after the credentials, as accounting does.
	Members ledger.Members
	// Audit is the server's server.Options.Audit.
	Audit ledger.Audit
}

// Start serves store on 127.0.0.1 until the test ends.
func Start(tb testing.TB, store ledger.Store, opts Options) *Fixture {
	tb.Helper()
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	az, err := authn.NewAuthorizer(authn.Tokens{Service: ServiceToken, Admin: AdminToken})
	if err != nil {
		tb.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	hub := server.NewHub(store, log, opts.SubscriberBuffer)
	api := server.New(store, hub, server.Options{Logger: log, Now: opts.Now, Observe: opts.Observe, Webhooks: opts.Webhooks,
		Members: opts.Members, Audit: opts.Audit})
	sopts := append(az.ServerOptions(), grpc.ChainUnaryInterceptor(api.Authorize()))
	srv := grpc.NewServer(append(sopts, opts.ServerOptions...)...)
	api.Register(srv)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); hub.Run(ctx) }()
	go func() { defer wg.Done(); _ = srv.Serve(lis) }()
	tb.Cleanup(func() {
		cancel()
		srv.Stop()
		wg.Wait()
	})
	return &Fixture{Addr: lis.Addr().String(), Store: store, Hub: hub}
}

// Dial returns a connection presenting token (none when empty), closed when the test
// ends.
func (f *Fixture) Dial(tb testing.TB, token string) *grpc.ClientConn {
	tb.Helper()
	var (
		cc  *grpc.ClientConn
		err error
	)
	if token == "" {
		cc, err = grpc.NewClient(f.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		cc, err = client.Dial(context.Background(), f.Addr, token)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Ledger returns a LedgerService client presenting token.
func (f *Fixture) Ledger(tb testing.TB, token string) accountingv1.LedgerServiceClient {
	return accountingv1.NewLedgerServiceClient(f.Dial(tb, token))
}

// Person returns an AdminService client presenting the admin token for person, as
// the console calls for a signed-in person.
func (f *Fixture) Person(tb testing.TB, person string) accountingv1.AdminServiceClient {
	tb.Helper()
	cc, err := grpc.NewClient(f.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(client.PersonCredentials(AdminToken, person)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cc.Close() })
	return accountingv1.NewAdminServiceClient(cc)
}

// Admin returns an AdminService client presenting token.
func (f *Fixture) Admin(tb testing.TB, token string) accountingv1.AdminServiceClient {
	return accountingv1.NewAdminServiceClient(f.Dial(tb, token))
}
