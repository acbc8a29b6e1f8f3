// Command localstack is `make run`: it starts the whole gateway on loopback in the
// foreground, prints where each part listens and one ready line with the base URL, and
// stops everything cleanly on Ctrl-C.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/llmgw/gateway/e2e/stack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the stack until ctx ends or a part exits.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	oidc := len(args) == 1 && args[0] == "--oidc"
	if len(args) > 0 && !oidc {
		fmt.Fprintln(stderr, "usage: localstack [--oidc] (configure with the environment variables in docs/configuration.md)")
		return 2
	}
	s, err := stack.Start(ctx, stack.Config{Log: stdout, UsePathEnvoy: true, OIDC: oidc})
	if err != nil {
		fmt.Fprintln(stderr, "localstack:", err)
		return 1
	}
	defer s.Stop()
	fmt.Fprintf(stdout, "postgres   | %s\n", s.DatabaseURL)
	fmt.Fprintf(stdout, "accounting | gRPC %s, health %s\n", s.AccountingAddr, s.AccountingMetricsAdr)
	fmt.Fprintf(stdout, "extproc    | gRPC %s, health %s\n", s.ExtprocAddr, s.ExtprocMetricsAddr)
	fmt.Fprintf(stdout, "mock       | providers %s\n", s.MockAddr)
	fmt.Fprintf(stdout, "console    | http://%s (sign in with the admin token in %s)\n", s.ConsoleAddr, s.AdminTokenFile())
	if oidc {
		fmt.Fprintf(stdout, "oidc       | OpenID provider %s: open http://%s and pick a person to sign in as:\n", s.OIDCIssuer(), s.ConsoleAddr)
		for _, p := range stack.SignInPeople {
			fmt.Fprintf(stdout, "oidc       |   %-22s %s of %s\n", p.Email, p.Role, p.Scope)
		}
	}
	fmt.Fprintf(stdout, "front      | %s on %s\n", s.Front, s.GatewayAddr)
	fmt.Fprintf(stdout, "ready: gateway at %s (bin/gatewayctl works from the repository root; Ctrl-C stops)\n", s.BaseURL)
	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "stopping")
		return 0
	case why := <-s.Exited():
		fmt.Fprintln(stderr, "localstack:", why)
		return 1
	}
}
