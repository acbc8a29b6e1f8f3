package console_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/llmgw/gateway/accounting/alerts"
	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	"github.com/llmgw/gateway/console"
)

// TestMain drops the template database the PostgreSQL tests made.
func TestMain(m *testing.M) { tablestest.Main(m) }

// browser is a cookie-keeping client that does not follow redirects blindly.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (b *browser) post(path string, form url.Values) (int, string) {
	b.t.Helper()
	resp, err := b.c.PostForm(b.base+path, form)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var (
	csrfRE      = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
	topUpFormRE = regexp.MustCompile(`action="/accounts/[^"]+/topup">.*\n?<input type="hidden" name="form" value="([0-9a-f]+)"`)
	keyFormRE   = regexp.MustCompile(`action="/accounts/[^"]+/keys">.*\n<input type="hidden" name="form" value="([0-9a-f]+)"`)
)

// topUpForm and keyForm read the one-time token of an account page's forms.
func topUpForm(t *testing.T, page string) string { t.Helper(); return match(t, topUpFormRE, page) }
func keyForm(t *testing.T, page string) string   { t.Helper(); return match(t, keyFormRE, page) }

func match(t *testing.T, re *regexp.Regexp, page string) string {
	t.Helper()
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no match of %s in %s", re, page)
	}
	return m[1]
}

// startConsole serves a console over a real accounting service on PostgreSQL, with
// opts (its Log replaced by an observer whose entries it returns), and a browser that
// has not signed in.
func startConsole(t *testing.T, opts console.Options) (*browser, *observer.ObservedLogs) {
	t.Helper()
	b, logs, _ := startConsoleFixture(t, opts)
	return b, logs
}

// startConsoleFixture is startConsole with the accounting it runs on, for tests that
// set up what the console has no form for.
func startConsoleFixture(t *testing.T, opts console.Options) (*browser, *observer.ObservedLogs, *servertest.Fixture) {
	t.Helper()
	st, pool := enginetest.NewLedger(t, 8)
	keys, err := alerts.ParseKeys(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32))))
	if err != nil {
		t.Fatal(err)
	}
	fx := servertest.Start(t, st, servertest.Options{Webhooks: &alerts.Webhooks{Pool: pool, Keys: keys}})
	conn, err := grpc.NewClient(fx.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	core, logs := observer.New(zap.DebugLevel)
	opts.Log = zap.New(core)
	srv := httptest.NewServer(console.New(conn, opts))
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: srv.URL, c: &http.Client{Jar: jar}}, logs, fx
}

func TestConsoleAgainstRealAccounting(t *testing.T) {
	b, _ := startConsole(t, console.Options{})
	srv := struct{ URL string }{b.base}
	jar := b.c.Jar

	if status, body := b.get("/healthz"); status != 200 || body != "ok\n" {
		t.Errorf("healthz: %d %q", status, body)
	}
	// Not signed in: every page sends to the sign-in page; a wrong token is refused.
	if _, body := b.get("/accounts"); !strings.Contains(body, `id="token"`) {
		t.Fatalf("unsigned visit: %s", body)
	}
	if status, body := b.post("/signin", url.Values{"token": {"wrong"}}); status != 401 || !strings.Contains(body, "refused") {
		t.Fatalf("wrong token: %d %s", status, body)
	}
	resp, err := b.c.Get(srv.URL + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	_, body := b.post("/signin", url.Values{"token": {servertest.AdminToken}})
	if strings.Contains(body, servertest.AdminToken) {
		t.Fatal("the admin token is echoed in a page")
	}
	for _, c := range jar.Cookies(mustURL(t, srv.URL)) {
		if strings.Contains(c.Value, servertest.AdminToken) {
			t.Fatal("the admin token is in a cookie")
		}
	}
	csrf := csrfRE.FindStringSubmatch(body)
	if csrf == nil {
		t.Fatalf("no CSRF token in %s", body)
	}
	// A form without the CSRF token is refused and changes nothing.
	if status, _ := b.post("/accounts", url.Values{"tier": {"default"}}); status != http.StatusForbidden {
		t.Fatalf("form without CSRF: %d", status)
	}
	_, body = b.post("/accounts", url.Values{"csrf": {csrf[1]}, "tier": {"default"}})
	id := regexp.MustCompile(`id="account-id">([^<]+)<`).FindStringSubmatch(body)
	if id == nil {
		t.Fatalf("account page: %s", body)
	}
	acc := id[1]
	_, body = b.post("/accounts/"+acc+"/topup", url.Values{"csrf": {csrf[1]}, "amount": {"12.5"}, "form": {topUpForm(t, body)}})
	if !strings.Contains(body, `id="balance">12.500000<`) {
		t.Errorf("after a top-up of 12.5: %s", body)
	}
	if _, body = b.post("/accounts/"+acc+"/topup", url.Values{"csrf": {csrf[1]}, "amount": {"1.0000001"}, "form": {topUpForm(t, body)}}); !strings.Contains(body, "six decimals") {
		t.Errorf("seven decimals: %s", body)
	}
	_, body = b.post("/accounts/"+acc+"/keys", url.Values{"csrf": {csrf[1]}, "name": {"ci"}, "models": {"demo-chat"}, "form": {keyForm(t, body)}})
	secret := regexp.MustCompile(`id="secret">(gw-[^<]+)<`).FindStringSubmatch(body)
	if secret == nil {
		t.Fatalf("no secret shown: %s", body)
	}
	if _, again := b.get("/accounts/" + acc); strings.Contains(again, secret[1]) {
		t.Error("the secret is shown a second time")
	}
	keyID := regexp.MustCompile(`<tr id="key-([^"]+)"`).FindStringSubmatch(body)[1]
	_, body = b.post("/keys/"+keyID+"/update", url.Values{"csrf": {csrf[1]}, "account": {acc}, "models": {"demo-chat, demo-claude"},
		"daily": {"2.5"}, "expires": {"2031-01-02"}})
	if !strings.Contains(body, `value="demo-chat,demo-claude"`) || !strings.Contains(body, `value="2.500000"`) || !strings.Contains(body, `value="2031-01-02"`) {
		t.Errorf("allowlist, limit and expiry not updated: %s", body)
	}
	// Emptied, the expiry and the limit go.
	_, body = b.post("/keys/"+keyID+"/update", url.Values{"csrf": {csrf[1]}, "account": {acc}, "models": {"demo-chat, demo-claude"}})
	if strings.Contains(body, `value="2031-01-02"`) || strings.Contains(body, `value="2.500000"`) {
		t.Errorf("expiry or limit kept after emptying: %s", body)
	}
	_, body = b.get("/accounts/" + acc + "/statement")
	if !strings.Contains(body, "12.500000") {
		t.Errorf("statement: %s", body)
	}
	resp, err = b.c.Get(srv.URL + "/accounts/" + acc + "/statement?format=csv")
	if err != nil {
		t.Fatal(err)
	}
	csvBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" || !strings.Contains(string(csvBody), ",top_up,12.500000,") {
		t.Errorf("statement CSV %s: %s", resp.Header.Get("Content-Type"), csvBody)
	}
	if status, _ := b.get("/tiers"); status != 200 {
		t.Errorf("tiers page: %d", status)
	}
	if status, body := b.get("/accounts/" + acc + "/usage?by=model"); status != 200 || !strings.Contains(body, `id="usage-total">0.000000<`) {
		t.Errorf("usage page: %d %s", status, body)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
