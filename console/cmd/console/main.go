// Command console serves the operators' web console (package console) on CONSOLE_ADDR
// (127.0.0.1:8090), talking to accounting at ACCOUNTING_ADDR (127.0.0.1:50052).
// CONSOLE_SECURE_COOKIE=true marks the session cookie Secure behind an ingress that
// terminates TLS; CONSOLE_ADMIN_TOKEN_FILE names, on the sign-in page, the file that
// holds the admin token (the local stack sets it; the console never reads it).
//
// Single sign-on (docs/console.md): --oidc-issuer (CONSOLE_OIDC_ISSUER),
// --oidc-client-id (CONSOLE_OIDC_CLIENT_ID), --oidc-client-secret-file
// (CONSOLE_OIDC_CLIENT_SECRET_FILE), --public-url (CONSOLE_PUBLIC_URL) and
// --accounting-token-file (CONSOLE_ACCOUNTING_TOKEN_FILE, the console's own credential
// to accounting); --session-key-file (CONSOLE_SESSION_KEY_FILE) optionally names 32
// random bytes (hex) that seal persons' sessions instead of a key derived from the
// credential and the client secret.
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/llmgw/gateway/accounting/authn"
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
	issuer := flag.String("oidc-issuer", os.Getenv("CONSOLE_OIDC_ISSUER"), "OpenID Connect issuer URL; set, people sign in with it (env CONSOLE_OIDC_ISSUER)")
	clientID := flag.String("oidc-client-id", os.Getenv("CONSOLE_OIDC_CLIENT_ID"), "the console's OpenID Connect client id (env CONSOLE_OIDC_CLIENT_ID)")
	secretFile := flag.String("oidc-client-secret-file", os.Getenv("CONSOLE_OIDC_CLIENT_SECRET_FILE"), "file holding the client secret, one line (env CONSOLE_OIDC_CLIENT_SECRET_FILE)")
	publicURL := flag.String("public-url", os.Getenv("CONSOLE_PUBLIC_URL"), "where browsers reach the console; the redirect is {public-url}/auth/callback (env CONSOLE_PUBLIC_URL)")
	accountingTokenFile := flag.String("accounting-token-file", os.Getenv("CONSOLE_ACCOUNTING_TOKEN_FILE"), "file holding the console's own credential to accounting, presented for signed-in people (env CONSOLE_ACCOUNTING_TOKEN_FILE)")
	sessionKeyFile := flag.String("session-key-file", os.Getenv("CONSOLE_SESSION_KEY_FILE"), "file holding 32 bytes in hex that seal people's sessions (env CONSOLE_SESSION_KEY_FILE; default: derived from the credential and the client secret)")
	flag.Parse()
	log := logging.New(os.Stderr, "console")
	opts := console.Options{Log: log, SecureCookie: *secure, AdminTokenFile: *tokenFile}
	if *issuer != "" {
		if err := ssoOptions(&opts, *issuer, *clientID, *secretFile, *publicURL, *accountingTokenFile, *sessionKeyFile); err != nil {
			log.Fatal("single sign-on", zap.Error(err))
		}
	}
	if err := opts.Validate(); err != nil {
		log.Fatal("console options", zap.Error(err))
	}
	// Plaintext to accounting, as the other parts of the local stack; each call carries
	// the signed-in operator's token. In a cluster the mesh (or TLS options) protects it.
	// Its reconnect back-off is every accounting client's (client.Reconnect).
	conn, err := grpc.NewClient(*accounting, grpc.WithTransportCredentials(insecure.NewCredentials()), client.Reconnect())
	if err != nil {
		log.Fatal("accounting connection", zap.Error(err))
	}
	defer func() { _ = conn.Close() }()
	srv := console.New(conn, opts).HTTPServer(*listen)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("console listening", zap.String("addr", *listen), zap.String("accounting", *accounting), zap.String("oidc_issuer", *issuer))
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal("console", zap.Error(err))
	}
	log.Info("console stopped")
}

// ssoOptions reads the single sign-on settings into o; secrets come from files (one
// line, a trailing newline ignored) and never appear in an error.
func ssoOptions(o *console.Options, issuer, clientID, secretFile, publicURL, tokenFile, keyFile string) error {
	var errs []error
	secret, err := oneLine(secretFile, "the OIDC client secret")
	errs = append(errs, err)
	token, err := authn.LoadToken(tokenFile, "", func(string) string { return "" })
	if err == nil && token == "" {
		err = errors.New("the accounting token file is missing (--accounting-token-file)")
	}
	errs = append(errs, err)
	if keyFile != "" {
		k, err := oneLine(keyFile, "the session key")
		if err == nil {
			o.SessionKey, err = hex.DecodeString(k)
			if err != nil || len(o.SessionKey) != console.SessionKeyBytes {
				err = fmt.Errorf("the session key file must hold %d bytes in hex", console.SessionKeyBytes)
			}
		}
		errs = append(errs, err)
	}
	o.SSO = &console.SSO{Issuer: issuer, ClientID: clientID, ClientSecret: secret, PublicURL: publicURL}
	o.AccountingToken = token
	return errors.Join(errs...)
}

// oneLine reads a file of one line; a trailing newline (LF or CRLF) is ignored.
func oneLine(file, what string) (string, error) {
	if file == "" {
		return "", fmt.Errorf("%s: no file named", what)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" || strings.ContainsAny(v, "\r\n") {
		return "", fmt.Errorf("%s: the file %s must hold one line", what, file)
	}
	return v, nil
}
