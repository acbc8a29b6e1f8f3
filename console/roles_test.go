package console_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/server/servertest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

func (f *ssoFixture) post(u string, form url.Values) (int, string) {
	f.t.Helper()
	resp, err := f.client().PostForm(u, form)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A signed-in person acts by their membership: a viewer sees the account but its
// top-up is refused with 403 and adds nothing; a member of a project sees only that
// project's keys and its account, and disables a key there; a person with no
// membership sees a page that says so, and nothing else.
func TestSignedInPersonsByRole(t *testing.T) {
	f := newSSOFixture(t)
	base := f.start()
	admin := f.fx.Admin(t, servertest.AdminToken)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	acc, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{Label: "Acme"})
	must(err)
	acme := acc.GetAccount().GetId()
	oth, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{Label: "Other corp"})
	must(err)
	other := oth.GetAccount().GetId()
	proj := func(name string) string {
		p, err := admin.CreateProject(ctx, &accountingv1.CreateProjectRequest{AccountId: acme, Name: name})
		must(err)
		return p.GetProject().GetId()
	}
	research, sales := proj("research"), proj("sales")
	key := func(p string) string {
		k, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: acme, ProjectId: p})
		must(err)
		return k.GetKey().GetId()
	}
	kR, kS := key(research), key(sales)
	for _, m := range []*accountingv1.AddMemberRequest{
		{Email: "vic@example.com", Role: "viewer", AccountId: acme},
		{Email: "mia@example.com", Role: "member", ProjectId: research},
	} {
		_, err := admin.AddMember(ctx, m)
		must(err)
	}

	// A viewer: the account page, and 403 on the top-up form.
	f.idp.SignInAs("vic@example.com", true)
	if status, body := f.signIn(base, nil); status != 200 {
		t.Fatalf("viewer sign-in: %d %s", status, body)
	}
	resp, body := f.get(base + "/accounts/" + acme)
	if resp.StatusCode != 200 || !strings.Contains(body, `id="account-id">`+acme+`<`) {
		t.Fatalf("viewer's account page: %d %s", resp.StatusCode, body)
	}
	body0 := body
	status, body := f.post(base+"/accounts/"+acme+"/topup", url.Values{"csrf": {match(t, csrfRE, body)},
		"form": {match(t, topUpFormRE, body)}, "amount": {"5"}})
	if status != http.StatusForbidden || !strings.Contains(body, "Your role may not do this") {
		t.Errorf("viewer's top-up: %d %s", status, body)
	}
	// Refused before anything about the form: a wrong amount is not what it hears.
	status, body = f.post(base+"/accounts/"+acme+"/topup", url.Values{"csrf": {match(t, csrfRE, body0)},
		"form": {match(t, topUpFormRE, body0)}, "amount": {"not a number"}})
	if status != http.StatusForbidden {
		t.Errorf("viewer's top-up with a wrong amount: %d %s", status, body)
	}
	if status, body = f.post(base+"/tiers", url.Values{"csrf": {match(t, csrfRE, body0)}}); status != http.StatusForbidden {
		t.Errorf("viewer's tier form: %d %s", status, body)
	}
	// Webhooks are an admin's: their page and their test button are refused to a viewer.
	if resp, body := f.get(base + "/accounts/" + acme + "/webhooks"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("viewer's webhooks page: %d %s", resp.StatusCode, body)
	}
	if status, body = f.post(base+"/accounts/"+acme+"/webhooks/00000000-0000-0000-0000-000000000000/test",
		url.Values{"csrf": {match(t, csrfRE, body0)}}); status != http.StatusForbidden || !strings.Contains(body, "Your role may not do this") {
		t.Errorf("viewer's test webhook: %d %s", status, body)
	}
	a, err := admin.GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: acme})
	must(err)
	if a.GetAccount().GetBalanceMicros() != 0 {
		t.Errorf("a refused top-up added %d", a.GetAccount().GetBalanceMicros())
	}
	if resp, _ := f.get(base + "/accounts/" + other); resp.StatusCode != http.StatusNotFound {
		t.Errorf("viewer opens another account: %d", resp.StatusCode)
	}

	// A member of research: its account, only research's keys and project.
	f.idp.SignInAs("mia@example.com", true)
	if status, body := f.signIn(base, nil); status != 200 {
		t.Fatalf("member sign-in: %d %s", status, body)
	}
	_, body = f.get(base + "/accounts")
	if !strings.Contains(body, acme) || strings.Contains(body, other) {
		t.Errorf("member's account list: %s", body)
	}
	resp, body = f.get(base + "/accounts/" + acme)
	if resp.StatusCode != 200 || !strings.Contains(body, kR) || strings.Contains(body, kS) || strings.Contains(body, sales) {
		t.Errorf("member's account page shows more than its project: %d %s", resp.StatusCode, body)
	}
	status, body = f.post(base+"/keys/"+kR+"/disable", url.Values{"csrf": {match(t, csrfRE, body)}})
	if status != http.StatusOK && status != http.StatusSeeOther {
		t.Errorf("member disables a key of its project: %d %s", status, body)
	}
	k, err := admin.GetKey(ctx, &accountingv1.GetKeyRequest{KeyId: kR})
	must(err)
	if !k.GetKey().GetDisabled() {
		t.Error("the member's key is not disabled")
	}

	// No membership: a page that says so, and the session ends.
	f.idp.SignInAs("nobody@example.com", true)
	f.signIn(base, nil)
	resp, body = f.get(base + "/accounts")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `id="no-membership"`) || strings.Contains(body, acme) ||
		strings.Contains(body, `id="create-account"`) {
		t.Errorf("no membership: %d %s", resp.StatusCode, body)
	}
	if who := f.signedInAs(base); who != "" {
		t.Errorf("still signed in as %q", who)
	}
}

// The audit log page shows each change with who made it and how: a person's through
// the console by their email.
func TestAuditLogPage(t *testing.T) {
	f := newSSOFixture(t)
	base := f.start()
	f.idp.SignInAs("ada@example.com", true)
	if status, body := f.signIn(base, nil); status != 200 {
		t.Fatalf("sign-in: %d %s", status, body)
	}
	_, body := f.get(base + "/accounts")
	status, body := f.post(base+"/accounts", url.Values{"csrf": {match(t, csrfRE, body)}, "tier": {"default"}})
	if status != http.StatusOK && status != http.StatusSeeOther {
		t.Fatalf("create account: %d %s", status, body)
	}
	resp, body := f.get(base + "/audit")
	if resp.StatusCode != 200 || !strings.Contains(body, "<td>ada@example.com</td><td>console</td><td>account.create</td>") {
		t.Errorf("audit page: %d %s", resp.StatusCode, body)
	}
}
