// Command console serves the operators' web console (package console) on CONSOLE_ADDR
// (127.0.0.1:8090), talking to accounting at ACCOUNTING_ADDR (127.0.0.1:50052).
// CONSOLE_SECURE_COOKIE=true marks the session cookie Secure behind an ingress that
// terminates TLS; CONSOLE_ADMIN_TOKEN_FILE names, on the sign-in page, the file that
// holds the admin token (the local stack sets it; the console never reads it).
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
	secure := flag.Bool("secure-cookie", os.Getenv("CONSOLE_SECURE_COOKIE") == "true", "mark the session cookie Secure on plain HTTP, behind a TLS-terminating ingress (env CONSOLE_SECURE_COOKIE=true)")
	tokenFile := flag.String("admin-token-file", os.Getenv("CONSOLE_ADMIN_TOKEN_FILE"), "file named on the sign-in page as holding the admin token; never read (env CONSOLE_ADMIN_TOKEN_FILE)")
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
	srv := console.New(conn, console.Options{Log: log, SecureCookie: *secure, AdminTokenFile: *tokenFile}).HTTPServer(*listen)
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
