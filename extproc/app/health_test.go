package app

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/authn"
	"github.com/llmgw/gateway/accounting/server"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

func TestDefaultsFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		drain   time.Duration
		hosts   int
		pprof   bool
		wantErr bool
	}{
		{name: "defaults", drain: DefaultDrainTimeout},
		{name: "drain from env", env: map[string]string{"EXTPROC_DRAIN_TIMEOUT": "45s"}, drain: 45 * time.Second},
		{name: "bad drain", env: map[string]string{"EXTPROC_DRAIN_TIMEOUT": "soon"}, wantErr: true},
		{name: "pprof on", env: map[string]string{"EXTPROC_PPROF": "1"}, drain: DefaultDrainTimeout, pprof: true},
		{name: "bad pprof", env: map[string]string{"EXTPROC_PPROF": "maybe"}, wantErr: true},
		{name: "public hosts", env: map[string]string{"GATEWAY_PUBLIC_HOSTS": "api.example.com, gateway"}, drain: DefaultDrainTimeout, hosts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Defaults(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if cfg.DrainTimeout != tt.drain || len(cfg.PublicHosts) != tt.hosts || cfg.Pprof != tt.pprof {
				t.Errorf("drain %v hosts %v", cfg.DrainTimeout, cfg.PublicHosts)
			}
		})
	}
}

// accountingServer is a stoppable accounting gRPC service on a fixed address.
type accountingServer struct {
	stop func()
}

func serveAccounting(t *testing.T, addr string) *accountingServer {
	t.Helper()
	var lis net.Listener
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The address was just released by the previous server: retry while the kernel
		// still holds it.
		if lis, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	az, err := authn.NewAuthorizer(authn.Tokens{Service: servertest.ServiceToken, Admin: servertest.AdminToken})
	if err != nil {
		t.Fatal(err)
	}
	st := servertest.NewMemory()
	hub := server.NewHub(st, zap.NewNop(), 0)
	gs := grpc.NewServer(az.ServerOptions()...)
	server.New(st, hub, server.Options{}).Register(gs)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); hub.Run(ctx) }()
	go func() { defer wg.Done(); _ = gs.Serve(lis) }()
	var once sync.Once
	s := &accountingServer{stop: func() { once.Do(func() { cancel(); gs.Stop(); wg.Wait() }) }}
	t.Cleanup(s.stop)
	return s
}

// TestReadyFollowsAccounting: /readyz is 503 while accounting is unreachable and OK
// again once it is back; /healthz stays OK throughout.
func TestReadyFollowsAccounting(t *testing.T) {
	setDemoEnv(t)
	t.Setenv("GATEWAY_SERVICE_TOKEN", servertest.ServiceToken)
	accAddr := freeAddr(t)
	acc := serveAccounting(t, accAddr)
	httpAddr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"--listen", freeAddr(t), "--metrics-addr", httpAddr, "--accounting-addr", accAddr, "--catalog", demoCatalog()}, logs)
	}()
	readyz, healthz := "http://"+httpAddr+"/readyz", "http://"+httpAddr+"/healthz"
	waitStatus(t, readyz, http.StatusOK, logs)

	acc.stop()
	waitStatus(t, readyz, http.StatusServiceUnavailable, logs)
	waitStatus(t, healthz, http.StatusOK, logs)

	serveAccounting(t, accAddr)
	waitStatus(t, readyz, http.StatusOK, logs)

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d:\n%s", code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Main did not stop")
	}
}
