package e2e_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmgw/gateway/console/oidctest"
)

// TestWebConsoleRolesInABrowser signs one person of each role in through a local
// OpenID provider, in headless Chromium, and has each do one thing its role allows on
// one account, and try one its role does not, shown refused in words: the admin tops
// up; the operator creates a key (a top-up refused); billing tops up (a suspension
// refused); the viewer reads the usage (a suspension refused); the project's member
// creates a key in its project (a limit above the project's, and a top-up, refused).
// gatewayctl then sees exactly what was allowed.
func TestWebConsoleRolesInABrowser(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(t, "gateway-console", "e2e-roles-secret-0123456789")
	tag := fmt.Sprint(time.Now().UnixNano())
	account := fmt.Sprint(ctl(t, "account", "create")["id"])
	research := newProject(t, account, "research", "--daily-limit", "5")
	email := func(role string) string { return role + "-" + tag + "@example.com" }
	for _, m := range [][]string{
		{"admin"}, {"operator", "--account", account}, {"billing", "--account", account},
		{"viewer", "--account", account}, {"member", "--project", research},
	} {
		ctl(t, append([]string{"member", "add", "--email", email(m[0]), "--role", m[0]}, m[1:]...)...)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	base := "http://localhost:" + port
	ssoConsole(t, idp, addr, base)

	ctx := chromiumWithin(t, 4*time.Minute) // five sign-ins
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	accountPage := base + "/accounts/" + account
	refused := waitText("#error", "Your role may not do this")
	as := func(role string, actions ...chromedp.Action) {
		t.Helper()
		idp.SignInAs(email(role), true)
		var person string
		run(role+": sign in", chromedp.Navigate(base+"/"), chromedp.WaitVisible("#accounts", chromedp.ByID),
			chromedp.Text("#person", &person, chromedp.ByID), chromedp.Navigate(accountPage), chromedp.WaitVisible("#account-id", chromedp.ByID))
		if person != email(role) {
			t.Fatalf("signed in as %q, want %s", person, email(role))
		}
		run(role, actions...)
		// A refusal's page has no session controls: sign out from the account's.
		run(role+": sign out", chromedp.Navigate(accountPage), chromedp.WaitVisible("#signout", chromedp.ByID),
			chromedp.Click("#signout", chromedp.ByID), chromedp.WaitVisible("#signed-out", chromedp.ByID))
	}
	topUp := func(amount string) []chromedp.Action {
		return []chromedp.Action{chromedp.Navigate(accountPage), chromedp.WaitVisible("#amount", chromedp.ByID),
			chromedp.SendKeys("#amount", amount, chromedp.ByID), chromedp.Click("#topup", chromedp.ByID)}
	}
	suspend := []chromedp.Action{chromedp.Navigate(accountPage), chromedp.WaitVisible("#suspend", chromedp.ByID), chromedp.Click("#suspend", chromedp.ByID)}
	newKey := func(name, daily string) []chromedp.Action {
		return []chromedp.Action{chromedp.Navigate(accountPage), chromedp.WaitVisible("#key-name", chromedp.ByID),
			chromedp.SendKeys("#key-name", name, chromedp.ByID), chromedp.SendKeys("#key-daily", daily, chromedp.ByID), chromedp.Click("#create-key", chromedp.ByID)}
	}
	then := func(groups ...[]chromedp.Action) []chromedp.Action {
		var all []chromedp.Action
		for _, g := range groups {
			all = append(all, g...)
		}
		return all
	}
	var secrets [2]string
	as("admin", then(topUp("10"), []chromedp.Action{waitText("#note", "Topped up")})...)
	as("operator", then(newKey("ops", ""), []chromedp.Action{chromedp.WaitVisible("#secret", chromedp.ByID), chromedp.Text("#secret", &secrets[0], chromedp.ByID)},
		topUp("1"), []chromedp.Action{refused})...)
	as("billing", then(topUp("5"), []chromedp.Action{waitText("#note", "Topped up")}, suspend, []chromedp.Action{refused})...)
	var usage string
	as("viewer", then([]chromedp.Action{chromedp.Click("#usage-link", chromedp.ByID), chromedp.WaitVisible("#usage-chart", chromedp.ByID),
		chromedp.Text("#usage-total", &usage, chromedp.ByID)}, suspend, []chromedp.Action{refused})...)
	var options string
	as("member", then(
		[]chromedp.Action{chromedp.Text("#key-project", &options, chromedp.ByID)},
		newKey("mine", "6"), []chromedp.Action{waitText("#error", `exceeds the daily limit of project "research"`)},
		newKey("mine", "1"), []chromedp.Action{chromedp.WaitVisible("#secret", chromedp.ByID), chromedp.Text("#secret", &secrets[1], chromedp.ByID)},
		topUp("1"), []chromedp.Action{refused})...)

	if usage != "0.000000" {
		t.Errorf("the viewer's usage total %q", usage)
	}
	if strings.TrimSpace(options) != "research" {
		t.Errorf("the member's project choices %q, want research only", options)
	}
	for i, s := range secrets {
		if !strings.HasPrefix(s, "gw-") {
			t.Errorf("secret %d not shown: %q", i, s)
		}
	}
	a := ctl(t, "account", "show", account)
	if micros(t, a, "balance") != 15_000_000 || a["suspended"] != false {
		t.Errorf("after the roles' actions: %v (want balance 15, not suspended)", a)
	}
	keys, _ := ctl(t, "key", "list", "--account", account)["keys"].([]any)
	byName := map[string]map[string]any{}
	for _, k := range keys {
		k := k.(map[string]any)
		byName[fmt.Sprint(k["name"])] = k
	}
	if len(keys) != 2 || byName["ops"]["project_id"] != "" || byName["mine"]["project_id"] != research {
		t.Errorf("keys after the roles' actions: %v", keys)
	}
}

// waitText waits until the element's text contains want (the page a form posted to has
// loaded).
func waitText(sel, want string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		for {
			var got string
			if err := chromedp.Run(ctx, chromedp.Text(sel, &got, chromedp.ByQuery, chromedp.AtLeast(0))); err == nil && strings.Contains(got, want) {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s never read %q", sel, want)
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}
