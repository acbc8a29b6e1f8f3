package e2e_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/llmgw/gateway/console/oidctest"
)

// ssoConsole runs the console binary with single sign-on against idp, on addr, until
// stop (or the test's end).
func ssoConsole(t *testing.T, idp *oidctest.Provider, addr, publicURL string) (stop func()) {
	t.Helper()
	return ssoConsoleFor(t, idp.URL, idp.ClientID, idp.ClientSecret, addr, publicURL)
}

// ssoConsoleFor runs the console binary with single sign-on against the provider at
// issuer, for the client id and secret.
func ssoConsoleFor(t *testing.T, issuer, clientID, clientSecret, addr, publicURL string) (stop func()) {
	t.Helper()
	dir := t.TempDir()
	secret := filepath.Join(dir, "client-secret")
	if err := os.WriteFile(secret, []byte(clientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	token := gw.AdminTokenFile()
	if !filepath.IsAbs(token) {
		token = filepath.Join(gw.Root, token)
	}
	return runPart(t, addr, "console", "--listen", addr, "--accounting-addr", gw.AccountingTarget(),
		"--oidc-issuer", issuer, "--oidc-client-id", clientID, "--oidc-client-secret-file", secret,
		"--public-url", publicURL, "--accounting-token-file", token)
}

// runPart runs the binary bin of the stack's bin directory with args until stop (or
// the test's end), and returns once it listens on addr.
func runPart(t *testing.T, addr, bin string, args ...string) (stop func()) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(gw.BinDir, bin), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	log, _ := os.Create(filepath.Join(dir, bin+".log"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop = func() {
		select {
		case <-done:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(stop)
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return stop
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, bin+".log"))
			t.Fatalf("%s never listened on %s:\n%s", bin, addr, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWebConsoleSingleSignOn drives the console binary, started with the contract's
// single sign-on flags, in headless Chromium with a local OpenID provider on another
// site (localhost against 127.0.0.1): opening the console leads through the provider
// and back signed in as the person; a change works; the session survives a restart of
// the console without the provider being asked again; sign-out ends it.
func TestWebConsoleSingleSignOn(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(t, "gateway-console", "e2e-client-secret-0123456789")
	idp.SignInAs("Ada.Lovelace@example.com", true)
	// Accounting authorizes a person by their membership: Ada may do everything.
	if m := ctl(t, "member", "add", "--email", "Ada.Lovelace@example.com", "--role", "admin"); m["email"] != "ada.lovelace@example.com" {
		t.Fatalf("member add: %v", m)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	base := "http://localhost:" + port // the provider is at 127.0.0.1: another site
	stop := ssoConsole(t, idp, addr, base)

	ctx := chromium(t)
	var person, account, signedOut string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#create-account", chromedp.ByID),
		chromedp.Text("#person", &person, chromedp.ByID),
		chromedp.Click("#create-account", chromedp.ByID),
		chromedp.WaitVisible("#account-id", chromedp.ByID),
		chromedp.Text("#account-id", &account, chromedp.ByID),
	); err != nil {
		t.Fatalf("sign in through the provider: %v", err)
	}
	if person != "ada.lovelace@example.com" || idp.Authorizations() != 1 {
		t.Fatalf("signed in as %q after %d visits to the provider", person, idp.Authorizations())
	}
	if a := ctl(t, "account", "show", account); a["id"] != account {
		t.Fatalf("the account made by the person: %v", a)
	}

	stop()
	ssoConsole(t, idp, addr, base)
	person = ""
	if err := chromedp.Run(ctx,
		chromedp.Navigate(base+"/accounts"),
		chromedp.WaitVisible("#create-account", chromedp.ByID),
		chromedp.Text("#person", &person, chromedp.ByID),
	); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	if person != "ada.lovelace@example.com" || idp.Authorizations() != 1 {
		t.Fatalf("after a restart: %q, %d visits to the provider", person, idp.Authorizations())
	}

	// Signed out, and the provider signing nobody in: the console is closed again.
	idp.SignInAs("", false)
	if err := chromedp.Run(ctx,
		chromedp.Click("#signout", chromedp.ByID),
		chromedp.WaitVisible("#signed-out", chromedp.ByID),
		chromedp.Text("#signed-out", &signedOut, chromedp.ByID),
		chromedp.Navigate(base+"/accounts"),
		chromedp.WaitVisible("#retry", chromedp.ByID),
	); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	var persons []*cdp.Node
	if err := chromedp.Run(ctx, chromedp.Nodes("#person", &persons, chromedp.ByQueryAll, chromedp.AtLeast(0))); err != nil {
		t.Fatal(err)
	}
	if len(persons) != 0 || !strings.Contains(signedOut, "signed out") || idp.Authorizations() != 2 {
		t.Fatalf("after sign-out: persons %v, %q, %d visits to the provider", persons, signedOut, idp.Authorizations())
	}
}
