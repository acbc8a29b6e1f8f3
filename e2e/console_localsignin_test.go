package e2e_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/llmgw/gateway/e2e/stack"
)

// TestConsoleLocalSignInRecipe is `make run OIDC=1` taken apart: the stack seeds one
// person per role with gatewayctl (again at the next start: nothing doubled), the
// local provider binary offers them on its sign-in page, and picking one signs that
// person in to the console binary configured as the stack configures it; the member
// sees its demo project only.
func TestConsoleLocalSignInRecipe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for range 2 {
		if err := gw.SeedSignIn(ctx); err != nil {
			t.Fatal(err)
		}
	}
	members, _ := ctl(t, "member", "list")["members"].([]any)
	roles := map[string][]string{}
	var team string
	for _, m := range members {
		m := m.(map[string]any)
		email := fmt.Sprint(m["email"])
		roles[email] = append(roles[email], fmt.Sprint(m["role"]))
		if email == "member@example.com" {
			team = fmt.Sprint(m["project_id"])
		}
	}
	for _, p := range stack.SignInPeople {
		if got := roles[p.Email]; len(got) != 1 || got[0] != p.Role {
			t.Errorf("%s has roles %v, want [%s] once", p.Email, got, p.Role)
		}
	}
	if pr := ctl(t, "project", "show", team); pr["name"] != "team" {
		t.Fatalf("the member's project: %v", pr)
	}

	// The provider binary, offering the people as the stack offers them.
	providerAddr, consoleAddr := freeAddr(t), freeAddr(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("local-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var people []string
	for _, p := range stack.SignInPeople {
		people = append(people, p.Email+"="+p.Role)
	}
	runPart(t, providerAddr, "oidcprovider", "--listen", providerAddr, "--client-id", stack.OIDCClientID,
		"--client-secret-file", secret, "--people", strings.Join(people, ","))
	base := "http://" + consoleAddr
	ssoConsoleFor(t, "http://"+providerAddr, stack.OIDCClientID, "local-secret-0123456789", consoleAddr, base)

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	get := func(u string) string {
		t.Helper()
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
		}
		return string(b)
	}
	chooser := get(base + "/")
	link := regexp.MustCompile(`<a href="([^"]+)" id="as-member@example.com">`).FindStringSubmatch(chooser)
	if link == nil || !strings.Contains(chooser, "operator@example.com") {
		t.Fatalf("the provider's sign-in page: %s", chooser)
	}
	signedIn := get("http://" + providerAddr + html.UnescapeString(link[1]))
	if !strings.Contains(signedIn, `<span id="person">member@example.com</span>`) {
		t.Fatalf("after picking the member: %s", signedIn)
	}
	accounts := get(base + "/accounts")
	account := regexp.MustCompile(`<a href="/accounts/([^"]+)">`).FindStringSubmatch(accounts)
	if account == nil || !strings.Contains(accounts, "<td>"+stack.SignInDemoLabel+"</td>") {
		t.Fatalf("the member's accounts: %s", accounts)
	}
	page := get(base + "/accounts/" + account[1])
	if !strings.Contains(page, `<option value="`+team+`">team</option></select>`) || strings.Contains(page, "none (the account itself)") {
		t.Errorf("the member's new-key form: %s", page)
	}
}

// freeAddr is a free loopback address.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
