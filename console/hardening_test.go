package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/console"
)

var (
	balanceRE   = regexp.MustCompile(`id="balance">([0-9.]+)<`)
	errorRE     = regexp.MustCompile(`id="error">([^<]*)<`)
	accountIDRE = regexp.MustCompile(`id="account-id">([^<]+)<`)
)

// signedIn signs b in and creates an account; it returns the CSRF token and the id.
func signedIn(t *testing.T, b *browser) (csrf, account string) {
	t.Helper()
	_, body := b.post("/signin", url.Values{"token": {servertest.AdminToken}})
	csrf = match(t, csrfRE, body)
	_, body = b.post("/accounts", url.Values{"csrf": {csrf}, "tier": {"default"}})
	return csrf, match(t, accountIDRE, body)
}

// Each rendered top-up form is its own top-up: two pages loaded, 10 then 5 submitted,
// the balance rises by 15. The same form submitted again (a double click, a resend) is
// refused and shown refused, and the balance stays; concurrent copies apply once.
func TestTopUpFormsAreOneTime(t *testing.T) {
	b, logs := startConsole(t, console.Options{})
	csrf, acc := signedIn(t, b)
	_, first := b.get("/accounts/" + acc)
	_, second := b.get("/accounts/" + acc)
	formA, formB := topUpForm(t, first), topUpForm(t, second)
	topUp := func(form, amount string) string {
		_, body := b.post("/accounts/"+acc+"/topup", url.Values{"csrf": {csrf}, "amount": {amount}, "form": {form}})
		return body
	}
	if body := topUp(formA, "10"); !strings.Contains(body, "Topped up 10.000000") {
		t.Fatalf("first form: %s", body)
	}
	if body := topUp(formB, "5"); !strings.Contains(body, "Topped up 5.000000") || match(t, balanceRE, body) != "15.000000" {
		t.Fatalf("second form, 5 after 10: balance %s, want 15.000000", match(t, balanceRE, body))
	}
	for _, amount := range []string{"10", "7"} {
		body := topUp(formA, amount)
		if e := errorRE.FindStringSubmatch(body); e == nil || !strings.Contains(e[1], "Refused") || strings.Contains(body, "Topped up") {
			t.Errorf("the first form again with %s: not shown refused", amount)
		}
		if got := match(t, balanceRE, body); got != "15.000000" {
			t.Errorf("the first form again with %s: balance %s, want 15.000000", amount, got)
		}
	}
	if body := topUp("0123456789abcdef0123456789abcdef", "1"); !strings.Contains(body, "stale") || match(t, balanceRE, body) != "15.000000" {
		t.Errorf("a form this console never issued was not refused")
	}
	// Eight concurrent submissions of one fresh form: one top-up.
	_, page := b.get("/accounts/" + acc)
	form := topUpForm(t, page)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { topUp(form, "1") })
	}
	wg.Wait()
	if _, body := b.get("/accounts/" + acc); match(t, balanceRE, body) != "16.000000" {
		t.Errorf("one form submitted 8 times at once: balance %s, want 16.000000", match(t, balanceRE, body))
	}
	if n := len(logs.FilterMessage("console change").FilterField(zap.String("action", "top up")).All()); n != 3 {
		t.Errorf("%d top-ups logged, want 3", n)
	}
}

// Reloading the page that showed a new key's secret submits its form again: refused,
// and no second key is minted.
func TestNewKeyFormMintsOnce(t *testing.T) {
	b, logs := startConsole(t, console.Options{})
	csrf, acc := signedIn(t, b)
	_, page := b.get("/accounts/" + acc)
	form := url.Values{"csrf": {csrf}, "name": {"once"}, "models": {""}, "form": {keyForm(t, page)}}
	_, body := b.post("/accounts/"+acc+"/keys", form)
	secret := regexp.MustCompile(`id="secret">(gw-[^<]+)<`).FindStringSubmatch(body)
	if secret == nil {
		t.Fatal("no secret shown")
	}
	_, body = b.post("/accounts/"+acc+"/keys", form)
	if strings.Contains(body, `id="secret"`) || !strings.Contains(body, "Refused") {
		t.Errorf("the new-key form again: not refused")
	}
	if n := strings.Count(body, `<tr id="key-`); n != 1 {
		t.Errorf("%d keys after resubmitting the new-key form, want 1", n)
	}
	// Oversized labels are refused in the console's words, naming the field.
	_, page = b.get("/accounts/" + acc)
	_, body = b.post("/accounts/"+acc+"/keys", url.Values{"csrf": {csrf}, "name": {strings.Repeat("n", 201)}, "form": {keyForm(t, page)}})
	if e := errorRE.FindStringSubmatch(body); e == nil || !strings.Contains(e[1], "name") || strings.Count(body, `<tr id="key-`) != 1 {
		t.Errorf("a 201-character name: not refused")
	}
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if strings.Contains(fmt.Sprint(v), secret[1]) || strings.Contains(fmt.Sprint(v), servertest.AdminToken) {
				t.Errorf("log %q field %s holds a secret", e.Message, k)
			}
		}
	}
	if len(logs.FilterMessage("console change").FilterField(zap.String("action", "create key")).All()) != 1 {
		t.Error("the key creation is not logged once")
	}
}

// The tier form reads each number as written or says which field is wrong; nothing is
// saved then.
func TestTierFormValidatesEachField(t *testing.T) {
	b, _ := startConsole(t, console.Options{})
	csrf, _ := signedIn(t, b)
	save := func(fields map[string]string) string {
		form := url.Values{"csrf": {csrf}}
		for k, v := range fields {
			form.Set(k, v)
		}
		_, body := b.post("/tiers", form)
		return body
	}
	body := save(map[string]string{"name": "probe", "rpm_before": "60 ", "rpm_after": "1,200", "in_flight": "", "in_flight_high_cost": "4294967328"})
	e := errorRE.FindStringSubmatch(body)
	if e == nil {
		t.Fatalf("bad fields saved: %s", body)
	}
	for _, want := range []string{"RPM after", "In flight:", "In flight, high-cost"} {
		if !strings.Contains(e[1], want) {
			t.Errorf("the error does not name %q: %s", want, e[1])
		}
	}
	if strings.Contains(e[1], "RPM before") {
		t.Errorf("a padded number is refused: %s", e[1])
	}
	if strings.Contains(body, "<td>probe</td>") {
		t.Error("a tier with bad fields was saved")
	}
	body = save(map[string]string{"name": "probe", "rpm_before": "0", "rpm_after": "0", "in_flight": "2", "in_flight_high_cost": "1"})
	if e := errorRE.FindStringSubmatch(body); e == nil || !strings.Contains(e[1], "RPM after") {
		t.Errorf("a tier refusing every request was not refused")
	}
	body = save(map[string]string{"name": "probe", "rpm_before": "60 ", "rpm_after": "1200", "in_flight": "4", "in_flight_high_cost": "1"})
	if !strings.Contains(body, `<tr><td>probe</td><td class="num">60</td><td class="num">1200</td>`) {
		t.Errorf("a valid tier was not saved: %s", body)
	}
}

// Bodies are capped before they are read, uploads refused, and failed sign-ins bounded
// per address (even the right token waits then) and logged without the token.
func TestSignInIsBounded(t *testing.T) {
	b, logs := startConsole(t, console.Options{SignInFailures: console.SignInFailures{Burst: 3, Every: time.Hour}})
	big := strings.NewReader("token=" + strings.Repeat("a", console.MaxBody))
	resp, err := b.c.Post(b.base+"/signin", "application/x-www-form-urlencoded", big)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over MaxBody: %d, want 413", resp.StatusCode)
	}
	resp, err = b.c.Post(b.base+"/signin", "multipart/form-data; boundary=x", strings.NewReader("--x--\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("an upload: %d, want 415", resp.StatusCode)
	}
	for i := range 3 {
		if status, _ := b.post("/signin", url.Values{"token": {fmt.Sprintf("wrong-%d", i)}}); status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i, status)
		}
	}
	resp, err = b.c.PostForm(b.base+"/signin", url.Values{"token": {servertest.AdminToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("after 3 failures: %d Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	refused := logs.FilterMessage("console sign-in refused").All()
	if len(refused) != 4 {
		t.Errorf("%d refused sign-ins logged, want 4", len(refused))
	}
	for _, e := range refused {
		if strings.Contains(fmt.Sprint(e.ContextMap()), "wrong-") || strings.Contains(fmt.Sprint(e.ContextMap()), servertest.AdminToken) {
			t.Errorf("a sign-in log holds the token: %v", e.ContextMap())
		}
	}
}

// The session cookie is Secure behind a TLS-terminating ingress when configured, and
// the sign-in page names the admin token's file when one is set.
func TestSecureCookieAndTokenHint(t *testing.T) {
	for _, secure := range []bool{false, true} {
		b, _ := startConsole(t, console.Options{SecureCookie: secure, AdminTokenFile: ".run/admin-token"})
		_, page := b.get("/signin")
		if !strings.Contains(page, "<code>.run/admin-token</code>") {
			t.Errorf("the sign-in page does not name the token's file: %s", page)
		}
		b.c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := b.c.PostForm(b.base+"/signin", url.Values{"token": {servertest.AdminToken}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(resp.Cookies()) != 1 || resp.Cookies()[0].Secure != secure {
			t.Errorf("SecureCookie %v: cookies %v", secure, resp.Cookies())
		}
	}
	b, _ := startConsole(t, console.Options{})
	if _, page := b.get("/signin"); strings.Contains(page, "token-hint") {
		t.Error("a token hint without a token file")
	}
}

// Every read and write of the console's HTTP server is bounded in time.
func TestHTTPServerTimeouts(t *testing.T) {
	s := console.New(nil, console.Options{}).HTTPServer("127.0.0.1:0")
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Errorf("unbounded: %+v", s)
	}
}
