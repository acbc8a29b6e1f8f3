package app

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/internal/demoenv"
	"github.com/llmgw/gateway/internal/logging/logtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func demoCatalog() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "deploy", "local", "catalog.yaml")
}

// syncBuffer collects a process's logs while the test reads them.
type syncBuffer = logtest.Buffer

func setDemoEnv(t *testing.T) {
	for _, k := range demoenv.Vars() {
		v, _ := demoenv.Lookup(k)
		t.Setenv(k, v)
	}
}

func TestMainConfigErrors(t *testing.T) {
	setDemoEnv(t)
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{name: "no token", args: []string{"--catalog", demoCatalog()}, want: "no accounting service token"},
		{name: "bad catalog", env: map[string]string{"GATEWAY_SERVICE_TOKEN": "t"}, args: []string{"--catalog", "/nonexistent.yaml"}, want: "nonexistent.yaml"},
		{name: "bad flag", args: []string{"--nope"}, want: "flag provided but not defined"},
		{name: "auth failure burst env", env: map[string]string{"EXTPROC_AUTH_FAILURE_BURST": "0"}, want: "EXTPROC_AUTH_FAILURE_BURST"},
		{name: "auth failure rate env", env: map[string]string{"EXTPROC_AUTH_FAILURE_RATE": "fast"}, want: "EXTPROC_AUTH_FAILURE_RATE"},
		{name: "auth failure rate flag", args: []string{"--auth-failure-rate", "0"}, want: "--auth-failure-rate must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GATEWAY_SERVICE_TOKEN", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var out syncBuffer
			if code := Main(context.Background(), tt.args, &out); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("stderr %q lacks %q", out.String(), tt.want)
			}
		})
	}
}

// TestAuthFailureDefaults: the failed-key bound comes from the environment, with a
// burst of at least 100 by default.
func TestAuthFailureDefaults(t *testing.T) {
	cfg, err := Defaults(func(string) string { return "" })
	if err != nil || cfg.AuthFailures.Burst < 100 || cfg.AuthFailures.Rate <= 0 {
		t.Fatalf("defaults %+v, %v", cfg.AuthFailures, err)
	}
	env := map[string]string{"EXTPROC_AUTH_FAILURE_BURST": "500", "EXTPROC_AUTH_FAILURE_RATE": "2.5"}
	cfg, err = Defaults(func(k string) string { return env[k] })
	if err != nil || cfg.AuthFailures.Burst != 500 || cfg.AuthFailures.Rate != 2.5 {
		t.Fatalf("from env %+v, %v", cfg.AuthFailures, err)
	}
}

func TestMainServesAndStops(t *testing.T) {
	setDemoEnv(t)
	fx := servertest.Start(t, servertest.NewMemory(), servertest.Options{})
	t.Setenv("GATEWAY_SERVICE_TOKEN", servertest.ServiceToken)
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"--listen", grpcAddr, "--metrics-addr", httpAddr, "--accounting-addr", fx.Addr, "--catalog", demoCatalog()}, &out)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready; log:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if resp, err := http.Get("http://" + httpAddr + "/debug/pprof/"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("pprof without --pprof: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := extprocv3.NewExternalProcessorClient(conn).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(replay.RequestHeaders(true, ":method", "GET", ":path", "/v1/models")); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if ir := resp.GetImmediateResponse(); ir.GetStatus().GetCode() != 200 || !bytes.Contains(ir.GetBody(), []byte(`"demo-chat"`)) {
		t.Errorf("models = %v", resp)
	}
	_ = stream.CloseSend()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d; log:\n%s", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Main did not stop")
	}
	if strings.Contains(out.String(), servertest.ServiceToken) || strings.Contains(out.String(), "sk-mock") {
		t.Error("a secret reached the log")
	}
	if err := logtest.Check(out.String()); err != nil {
		t.Error(err)
	}
	if !strings.Contains(out.String(), `"extproc listening"`) {
		t.Errorf("log lacks the listening line:\n%s", out.String())
	}
}
