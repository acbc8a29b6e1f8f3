// Command console serves the operators' web console (package console) on CONSOLE_ADDR
// (127.0.0.1:8090), talking to accounting at ACCOUNTING_ADDR (127.0.0.1:50052).
package main

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/console"
	"github.com/llmgw/gateway/internal/logging"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	listen := flag.String("listen", env("CONSOLE_ADDR", "127.0.0.1:8090"), "address to serve the console on (env CONSOLE_ADDR)")
	accounting := flag.String("accounting-addr", env("ACCOUNTING_ADDR", "127.0.0.1:50052"), "accounting gRPC address (env ACCOUNTING_ADDR)")
	flag.Parse()
	log := logging.New(os.Stderr, "console")
	// Plaintext to accounting, as the other parts of the local stack; each call carries
	// the signed-in operator's token. In a cluster the mesh (or TLS options) protects it.
	// Its reconnect back-off is every accounting client's (client.Reconnect).
	conn, err := grpc.NewClient(*accounting, grpc.WithTransportCredentials(insecure.NewCredentials()), client.Reconnect())
	if err != nil {
		log.Fatal("accounting connection", zap.Error(err))
	}
	defer func() { _ = conn.Close() }()
	srv := &http.Server{Addr: *listen, Handler: console.New(conn), ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("console listening", zap.String("addr", *listen), zap.String("accounting", *accounting))
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal("console", zap.Error(err))
	}
	log.Info("console stopped")
}
