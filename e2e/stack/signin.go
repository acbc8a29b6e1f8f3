package stack

// Trying the console's single sign-on on the local stack (Config.OIDC, `make run
// OIDC=1`): a local OpenID provider (bin/oidcprovider) beside the console, the console
// configured for it, and one person per role seeded with gatewayctl, so a newcomer
// signs in as any of them in a browser. The admin token keeps working.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/llmgw/gateway/internal/runfiles"
)

// OIDCClientID is the console's client id at the local provider.
const OIDCClientID = "gateway-console"

// oidcSecretFile holds the client secret the provider and the console share (RunDir).
const oidcSecretFile = "oidc-client-secret"

// SignInDemoLabel labels the account the seeded people are scoped to.
const SignInDemoLabel = "Sign-in demo"

// Person is someone seeded to sign in: their address, role and scope in words.
type Person struct{ Email, Role, Scope string }

// SignInPeople are the people seeded, one per role.
var SignInPeople = []Person{
	{"admin@example.com", "admin", "everything"},
	{"operator@example.com", "operator", "the account " + SignInDemoLabel},
	{"billing@example.com", "billing", "the account " + SignInDemoLabel},
	{"viewer@example.com", "viewer", "the account " + SignInDemoLabel},
	{"member@example.com", "member", "the project team (in " + SignInDemoLabel + ")"},
}

// OIDCIssuer is the local provider's issuer URL.
func (s *Stack) OIDCIssuer() string { return "http://" + s.OIDCAddr }

// startOIDC writes the client secret and starts the provider.
func (s *Stack) startOIDC(ctx context.Context) error {
	if _, err := writeToken(filepath.Join(s.RunDir, oidcSecretFile)); err != nil {
		return err
	}
	var people []string
	for _, p := range SignInPeople {
		people = append(people, p.Email+"="+p.Role+" ("+p.Scope+")")
	}
	if err := s.spawn(ctx, "oidc", s.childEnv("oidc"), "oidcprovider", "--listen", s.OIDCAddr, "--client-id", OIDCClientID,
		"--client-secret-file", filepath.Join(s.RunDir, oidcSecretFile), "--people", strings.Join(people, ",")); err != nil {
		return err
	}
	return s.waitTCP(ctx, "oidc", s.OIDCAddr)
}

// oidcConsoleEnv is the console's single sign-on settings for the local provider.
func (s *Stack) oidcConsoleEnv() []string {
	return []string{
		"CONSOLE_OIDC_ISSUER=" + s.OIDCIssuer(),
		"CONSOLE_OIDC_CLIENT_ID=" + OIDCClientID,
		"CONSOLE_OIDC_CLIENT_SECRET_FILE=" + filepath.Join(s.RunDir, oidcSecretFile),
		"CONSOLE_PUBLIC_URL=http://" + s.ConsoleAddr,
		"CONSOLE_ACCOUNTING_TOKEN_FILE=" + filepath.Join(s.RunDir, runfiles.AdminTokenFile),
	}
}

// SeedSignIn gives each of SignInPeople their membership, with gatewayctl: the
// account labelled SignInDemoLabel and its project "team" are made when missing, and
// a person who already has a membership is left as they are, so every start may run
// it again.
func (s *Stack) SeedSignIn(ctx context.Context) error {
	ctl := func(v any, args ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(s.BinDir, "gatewayctl"), args...)
		cmd.Env = append(os.Environ(), "GATEWAY_ACCOUNTING_ADDR="+s.AccountingAddr, "GATEWAY_ADMIN_TOKEN="+s.AdminToken)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("gatewayctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return json.Unmarshal(out, v)
	}
	var members struct {
		Members []struct{ Email string } `json:"members"`
	}
	if err := ctl(&members, "member", "list"); err != nil {
		return err
	}
	has := map[string]bool{}
	for _, m := range members.Members {
		has[m.Email] = true
	}
	var accounts struct {
		Accounts []struct{ ID, Label string } `json:"accounts"`
	}
	if err := ctl(&accounts, "account", "list", "--label", SignInDemoLabel, "--limit", "100"); err != nil {
		return err
	}
	var account string
	for _, a := range accounts.Accounts {
		if a.Label == SignInDemoLabel {
			account = a.ID
		}
	}
	var made struct{ ID string }
	if account == "" {
		if err := ctl(&made, "account", "create", "--label", SignInDemoLabel); err != nil {
			return err
		}
		account = made.ID
	}
	var projects struct {
		Projects []struct{ ID, Name string } `json:"projects"`
	}
	if err := ctl(&projects, "project", "list", "--account", account); err != nil {
		return err
	}
	var team string
	for _, p := range projects.Projects {
		if p.Name == "team" {
			team = p.ID
		}
	}
	if team == "" {
		if err := ctl(&made, "project", "create", "--account", account, "--name", "team", "--daily-limit", "5"); err != nil {
			return err
		}
		team = made.ID
	}
	for _, p := range SignInPeople {
		if has[p.Email] {
			continue
		}
		args := []string{"member", "add", "--email", p.Email, "--role", p.Role}
		switch p.Role {
		case "admin":
		case "member":
			args = append(args, "--project", team)
		default:
			args = append(args, "--account", account)
		}
		if err := ctl(&made, args...); err != nil {
			return err
		}
	}
	return nil
}
