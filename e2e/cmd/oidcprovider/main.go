// Command oidcprovider is a local OpenID Connect provider for trying the console's
// single sign-on by hand (`make run OIDC=1` starts it): the test provider of package
// oidctest served on its own, whose sign-in page lists the people given with --people
// and signs in whichever is picked, without a password. Loopback only; never part of a
// deployment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/llmgw/gateway/console/oidctest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Main serves the provider until ctx ends.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("oidcprovider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8091", "loopback address to serve on; the issuer is http://{listen}")
	clientID := fs.String("client-id", "gateway-console", "the one client's id")
	secretFile := fs.String("client-secret-file", "", "file holding the client's secret, one line (required)")
	people := fs.String("people", "", "who may be picked on the sign-in page: email=note,email=note,… (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	offered, err := parsePeople(*people)
	if err == nil && *secretFile == "" {
		err = errors.New("--client-secret-file is required")
	}
	var secret []byte
	if err == nil {
		secret, err = os.ReadFile(*secretFile)
	}
	host, _, _ := net.SplitHostPort(*listen)
	if ip := net.ParseIP(host); err == nil && (ip == nil || !ip.IsLoopback()) {
		err = fmt.Errorf("--listen %s: loopback only", *listen)
	}
	if err != nil {
		fmt.Fprintln(stderr, "oidcprovider:", err)
		return 2
	}
	p, err := oidctest.New("http://"+*listen, *clientID, strings.TrimRight(string(secret), "\r\n"))
	if err != nil {
		fmt.Fprintln(stderr, "oidcprovider:", err)
		return 1
	}
	p.Offer(offered)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "oidcprovider:", err)
		return 1
	}
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(stdout, "OpenID provider at %s for client %s, offering %d people\n", p.URL, *clientID, len(offered))
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "oidcprovider:", err)
		return 1
	}
	return 0
}

// parsePeople reads "email=note,email=note".
func parsePeople(v string) ([]oidctest.Person, error) {
	var out []oidctest.Person
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		email, note, _ := strings.Cut(item, "=")
		if !strings.Contains(email, "@") {
			return nil, fmt.Errorf("--people: %q is not an email address", email)
		}
		out = append(out, oidctest.Person{Email: email, Note: note})
	}
	if len(out) == 0 {
		return nil, errors.New("--people names nobody")
	}
	return out, nil
}
