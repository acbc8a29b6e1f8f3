package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/server/servertest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// postThen posts a form and, when the answer is a redirect, follows it once: the
// status of the post, and the body of the page shown.
func (f *ssoFixture) postThen(base, path string, form url.Values) (int, string) {
	f.t.Helper()
	resp, err := f.client().PostForm(base+path, form)
	if err != nil {
		f.t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		status, body := f.post(base+path, form) // not a redirect: read it again for its body
		return status, body
	}
	_, body := f.get(base + resp.Header.Get("Location"))
	return resp.StatusCode, body
}

var projectSelectRE = regexp.MustCompile(`(?s)<select name="project" id="key-project"[^>]*>(.*?)</select>`)

// A project's member serves itself in the console: the new-key form offers only the
// projects of its subtree (no key outside them); it names a key and creates it in a
// child project, the secret shown once; a limit above the project's is refused in
// words and creates nothing; a project outside its subtree is not found and the
// account itself refused; it disables and revokes keys of its subtree, may not
// enable one, and sees its project's usage but not the whole account's.
func TestMemberSelfService(t *testing.T) {
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
	proj := func(name, parent string, daily *int64) string {
		p, err := admin.CreateProject(ctx, &accountingv1.CreateProjectRequest{AccountId: acme, Name: name, ParentId: parent, DailyLimitMicros: daily})
		must(err)
		return p.GetProject().GetId()
	}
	research := proj("research", "", i64(5_000_000))
	vision := proj("vision", research, nil)
	sales := proj("sales", "", nil)
	kS, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: acme, ProjectId: sales})
	must(err)
	_, err = admin.AddMember(ctx, &accountingv1.AddMemberRequest{Email: "mia@example.com", Role: "member", ProjectId: research})
	must(err)

	f.idp.SignInAs("mia@example.com", true)
	if status, body := f.signIn(base, nil); status != 200 {
		t.Fatalf("member sign-in: %d %s", status, body)
	}
	_, page := f.get(base + "/accounts/" + acme)
	options := match(t, projectSelectRE, page)
	if want := `<option value="` + research + `">research</option><option value="` + vision + `">research / vision</option>`; options != want {
		t.Errorf("the member's project choices\n%s, want\n%s", options, want)
	}
	if !strings.Contains(page, `<label for="key-project">Project</label>`) || !strings.Contains(page, `href="/accounts/`+acme+`/usage?project=`+research+`" id="usage-link"`) {
		t.Errorf("the new-key form's label or the usage link: %s", page)
	}
	form := func(page, project, daily string) url.Values {
		return url.Values{"csrf": {match(t, csrfRE, page)}, "form": {match(t, keyFormRE, page)}, "project": {project}, "name": {"ci runner"}, "daily": {daily}}
	}

	// Above the project's daily limit: refused in words, nothing created.
	status, body := f.postThen(base, "/accounts/"+acme+"/keys", form(page, vision, "6"))
	if status != http.StatusSeeOther || !strings.Contains(body, `the key&#39;s daily limit 6 exceeds the daily limit of project &#34;research&#34;`) {
		t.Errorf("a key above the project's limit: %d %s", status, body)
	}
	// Outside its subtree: the account itself is refused, another project not found.
	_, page = f.get(base + "/accounts/" + acme)
	if status, body = f.post(base+"/accounts/"+acme+"/keys", form(page, "", "")); status != http.StatusForbidden || !strings.Contains(body, "Your role may not do this") {
		t.Errorf("a key outside any project: %d %s", status, body)
	}
	if status, body = f.post(base+"/accounts/"+acme+"/keys", form(page, sales, "")); status != http.StatusNotFound {
		t.Errorf("a key in another project: %d %s", status, body)
	}
	keys, err := admin.ListKeys(ctx, &accountingv1.ListKeysRequest{AccountId: acme})
	must(err)
	if len(keys.GetKeys()) != 1 {
		t.Fatalf("refused forms created keys: %v", keys.GetKeys())
	}

	// Within the limits, in the child project: created, the secret shown once.
	status, body = f.post(base+"/accounts/"+acme+"/keys", form(page, vision, "2"))
	secret := regexp.MustCompile(`id="secret">(gw-[^<]+)<`).FindStringSubmatch(body)
	if status != 200 || secret == nil {
		t.Fatalf("the member's key: %d %s", status, body)
	}
	keys, err = admin.ListKeys(ctx, &accountingv1.ListKeysRequest{AccountId: acme})
	must(err)
	var mine *accountingv1.Key
	for _, k := range keys.GetKeys() {
		if k.GetId() != kS.GetKey().GetId() {
			mine = k
		}
	}
	if mine == nil || mine.GetProjectId() != vision || mine.GetName() != "ci runner" || mine.GetDailyLimitMicros() != 2_000_000 {
		t.Fatalf("the key created: %v", mine)
	}
	_, page = f.get(base + "/accounts/" + acme)
	if strings.Contains(page, secret[1]) || !strings.Contains(page, `<td class="project">research / vision</td>`) {
		t.Errorf("the secret shown again, or the key's project not named: %s", page)
	}

	// Disable and revoke in the subtree; enabling is not a member's; another
	// project's key is not found.
	csrf := match(t, csrfRE, page)
	for _, action := range []string{"disable", "revoke"} {
		if status, body = f.postThen(base, "/keys/"+mine.GetId()+"/"+action, url.Values{"csrf": {csrf}, "account": {acme}}); status != http.StatusSeeOther ||
			!strings.Contains(body, "Key "+action+"d.") {
			t.Errorf("%s: %d %s", action, status, body)
		}
	}
	k, err := admin.GetKey(ctx, &accountingv1.GetKeyRequest{KeyId: mine.GetId()})
	must(err)
	if !k.GetKey().GetRevoked() {
		t.Errorf("the member's key is not revoked: %v", k.GetKey())
	}
	if status, body = f.post(base+"/keys/"+mine.GetId()+"/enable", url.Values{"csrf": {csrf}, "account": {acme}}); status != http.StatusForbidden ||
		!strings.Contains(body, "Your role may not do this") {
		t.Errorf("a member enables a key: %d %s", status, body)
	}
	if status, _ = f.post(base+"/keys/"+kS.GetKey().GetId()+"/disable", url.Values{"csrf": {csrf}, "account": {acme}}); status != http.StatusNotFound {
		t.Errorf("a member disables another project's key: %d", status)
	}

	// Usage: its project's, not the whole account's.
	resp, body := f.get(base + "/accounts/" + acme + "/usage?project=" + research)
	if resp.StatusCode != 200 || !strings.Contains(body, `id="usage-chart"`) || strings.Contains(body, "the whole account") ||
		!strings.Contains(body, `<option value="`+research+`" selected>research (and below)</option>`) {
		t.Errorf("the member's project usage: %d %s", resp.StatusCode, body)
	}
	if resp, body = f.get(base + "/accounts/" + acme + "/usage"); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Your role may not do this") {
		t.Errorf("the member's account usage: %d %s", resp.StatusCode, body)
	}
	if resp, _ = f.get(base + "/accounts/" + acme + "/usage?project=" + sales); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another project's usage: %d", resp.StatusCode)
	}

	// An admin is offered the account itself and every project.
	f.idp.SignInAs("ada@example.com", true)
	f.signIn(base, nil)
	_, page = f.get(base + "/accounts/" + acme)
	if got := match(t, projectSelectRE, page); !strings.HasPrefix(got, `<option value="">none (the account itself)</option>`) || !strings.Contains(got, sales) {
		t.Errorf("an admin's project choices: %s", got)
	}
}

func i64(v int64) *int64 { return &v }
