package console_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables"
	"github.com/llmgw/gateway/console"
	"github.com/llmgw/gateway/console/oidctest"
)

var personRE = regexp.MustCompile(`id="person">([^<]+)<`)

// clock is a settable clock for the console (the provider keeps real time).
type clock struct {
	mu sync.Mutex
	at time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

// ssoFixture is a real accounting service, a test provider, and a way to start
// consoles (each a fresh process's worth of state) signed-in through it.
type ssoFixture struct {
	t     *testing.T
	conn  *grpc.ClientConn
	fx    *servertest.Fixture
	idp   *oidctest.Provider
	clock *clock
	jar   http.CookieJar
	// failures bounds failed sign-ins per address in the consoles started.
	failures console.SignInFailures
}

func newSSOFixture(t *testing.T) *ssoFixture {
	st, pool := enginetest.NewLedger(t, 8)
	members := tables.New(pool, tables.Options{})
	fx := servertest.Start(t, st, servertest.Options{Members: members, Audit: st})
	// The persons these tests sign in may do everything.
	for _, email := range []string{"ada@example.com", "eve@example.com", "grace@example.com"} {
		if _, err := members.AddMember(context.Background(), tables.Member{Email: email, Role: "admin"}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := grpc.NewClient(fx.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	jar, _ := cookiejar.New(nil)
	return &ssoFixture{t: t, conn: conn, fx: fx, idp: oidctest.Start(t, "console", "client-secret-1234"), clock: &clock{at: time.Now()}, jar: jar}
}

// start serves a console with the fixture's provider and accounting token (tok, when
// given, replaces it) and returns its base URL. Its cookies are the fixture's jar
// (cookies are per host, not port: consoles on other ports are one site, as one
// console restarted).
func (f *ssoFixture) start(tok ...string) string {
	f.t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	token := servertest.AdminToken
	if len(tok) > 0 {
		token = tok[0]
	}
	srv.Config.Handler = console.New(f.conn, console.Options{Now: f.clock.now, AccountingToken: token, SignInFailures: f.failures,
		SSO: &console.SSO{Issuer: f.idp.URL, ClientID: f.idp.ClientID, ClientSecret: f.idp.ClientSecret, PublicURL: base}})
	srv.Start()
	f.t.Cleanup(srv.Close)
	return base
}

// client follows no redirect: the tests follow each hop themselves.
func (f *ssoFixture) client() *http.Client {
	return &http.Client{Jar: f.jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (f *ssoFixture) get(u string) (*http.Response, string) {
	f.t.Helper()
	resp, err := f.client().Get(u)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, b.String()
}

// signIn goes from the console's /auth/signin to the provider and back; change, when
// set, edits the callback URL before the browser follows it. It returns the callback's
// answer.
func (f *ssoFixture) signIn(base string, change func(*url.URL)) (int, string) {
	f.t.Helper()
	resp, _ := f.get(base + "/auth/signin")
	authz, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(authz.String(), f.idp.URL+"/authorize?") {
		f.t.Fatalf("/auth/signin: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	q := authz.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("scope") != "openid email" ||
		q.Get("nonce") == "" || q.Get("state") == "" || q.Get("redirect_uri") != base+"/auth/callback" {
		f.t.Fatalf("authorization request: %v", q)
	}
	resp, _ = f.get(authz.String())
	cb, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil {
		f.t.Fatalf("provider: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if change != nil {
		change(cb)
	}
	resp, body := f.get(cb.String())
	return resp.StatusCode, body
}

// signedInAs reports who /accounts is shown to: "" when it sends to the sign-in.
func (f *ssoFixture) signedInAs(base string) string {
	f.t.Helper()
	resp, body := f.get(base + "/accounts")
	if resp.StatusCode == http.StatusSeeOther {
		if loc := resp.Header.Get("Location"); loc != "/auth/signin" {
			f.t.Fatalf("no session, sent to %q", loc)
		}
		return ""
	}
	if resp.StatusCode != 200 || !strings.Contains(body, `id="accounts"`) {
		f.t.Fatalf("/accounts: %d %s", resp.StatusCode, body)
	}
	return match(f.t, personRE, body)
}

// Opening the console leads to the provider; the code flow with PKCE signs the person
// in as their (lower-cased) email; the session is sealed (no email or token in the
// cookie) and calls accounting; sign-out ends it, and its cookie replayed is refused.
func TestSSOSignInAndOut(t *testing.T) {
	f := newSSOFixture(t)
	base := f.start()
	f.idp.SignInAs("Ada@Example.com", true)

	resp, _ := f.get(base + "/")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/accounts" {
		t.Fatalf("/: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if who := f.signedInAs(base); who != "" {
		t.Fatalf("signed in before signing in: %q", who)
	}
	status, body := f.signIn(base, nil)
	if status != 200 || !strings.Contains(body, `<meta http-equiv="refresh" content="0;url=/accounts">`) || !strings.Contains(body, "ada@example.com") {
		t.Fatalf("callback: %d %s", status, body)
	}
	if who := f.signedInAs(base); who != "ada@example.com" {
		t.Fatalf("signed in as %q", who)
	}
	u, _ := url.Parse(base)
	var sealed *http.Cookie
	for _, c := range f.jar.Cookies(u) {
		if c.Name == "gw_console" {
			sealed = c
		}
		if shows(c.Value, "ada@example.com") || strings.Contains(c.Value, servertest.AdminToken) {
			t.Errorf("cookie %s shows the email or the token: %s", c.Name, c.Value)
		}
	}
	if sealed == nil {
		t.Fatal("no session cookie")
	}
	// A change through accounting works for the person.
	_, page := f.get(base + "/accounts")
	csrf := match(t, csrfRE, page)
	resp, err := f.client().PostForm(base+"/accounts", url.Values{"csrf": {csrf}, "tier": {"default"}})
	if err != nil || resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/accounts/") {
		t.Fatalf("create account as a person: %v %v %q", err, resp.StatusCode, resp.Header.Get("Location"))
	}
	resp.Body.Close()

	resp, err = f.client().PostForm(base+"/signout", url.Values{"csrf": {csrf}})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("sign out: %v %v", err, resp.StatusCode)
	}
	resp.Body.Close()
	if who := f.signedInAs(base); who != "" {
		t.Fatalf("still signed in after sign-out as %q", who)
	}
	f.jar.SetCookies(u, []*http.Cookie{{Name: "gw_console", Value: sealed.Value, Path: "/"}})
	if who := f.signedInAs(base); who != "" {
		t.Fatalf("the signed-out cookie replayed is still %q", who)
	}
}

// Every ID token or callback that is not exactly right is refused, and nobody is
// signed in: a forged signature, an expired token, another audience or issuer, a
// wrong nonce, a wrong state, an unverified or missing email verification, no
// sign-in started, a provider's refusal.
func TestSSORefusals(t *testing.T) {
	f := newSSOFixture(t)
	f.failures.Burst = 100
	base := f.start()
	cases := []struct {
		name     string
		verified bool
		tamper   func(*oidctest.Token)
		change   func(*url.URL)
	}{
		{name: "forged", verified: true, tamper: func(tk *oidctest.Token) { tk.Forge = true }},
		{name: "expired", verified: true, tamper: func(tk *oidctest.Token) { tk.Claims.Expiry = time.Now().Add(-time.Minute).Unix() }},
		{name: "wrong audience", verified: true, tamper: func(tk *oidctest.Token) { tk.Claims.Audience = []string{"another-client"} }},
		{name: "wrong issuer", verified: true, tamper: func(tk *oidctest.Token) { tk.Claims.Issuer = "http://127.0.0.1:1" }},
		{name: "wrong nonce", verified: true, tamper: func(tk *oidctest.Token) { tk.Claims.Nonce = "not-the-nonce" }},
		{name: "no nonce", verified: true, tamper: func(tk *oidctest.Token) { tk.Claims.Nonce = "" }},
		{name: "email not verified", verified: false},
		{name: "no email_verified", verified: true, tamper: func(tk *oidctest.Token) { tk.Claims.EmailVerified = nil }},
		{name: "no email", verified: true, tamper: func(tk *oidctest.Token) { tk.Claims.Email = "" }},
		{name: "wrong state", verified: true, change: func(u *url.URL) {
			q := u.Query()
			q.Set("state", "forged-state")
			u.RawQuery = q.Encode()
		}},
		{name: "no sign-in started", verified: true, change: func(*url.URL) {
			u, _ := url.Parse(base)
			f.jar.SetCookies(&url.URL{Scheme: "http", Host: u.Host, Path: "/auth/"}, []*http.Cookie{{Name: "gw_console_auth", Value: "", MaxAge: -1, Path: "/auth/"}})
		}},
		{name: "provider refused", verified: true, change: func(u *url.URL) {
			q := u.Query()
			q.Del("code")
			q.Set("error", "access_denied")
			u.RawQuery = q.Encode()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.t = t
			f.idp.SignInAs("eve@example.com", c.verified)
			f.idp.TamperNext(c.tamper)
			status, body := f.signIn(base, c.change)
			if status != http.StatusUnauthorized && status != http.StatusBadRequest {
				t.Errorf("callback answered %d: %s", status, body)
			}
			if who := f.signedInAs(base); who != "" {
				t.Errorf("signed in as %q", who)
			}
		})
	}
	// The same flow untampered signs in: the refusals above were the tampering's.
	f.t = t
	f.idp.SignInAs("eve@example.com", true)
	if status, body := f.signIn(base, nil); status != 200 {
		t.Fatalf("untampered: %d %s", status, body)
	}
	if who := f.signedInAs(base); who != "eve@example.com" {
		t.Fatalf("untampered: signed in as %q", who)
	}
}

// A person's session survives a restart of the console (another instance with the
// same configuration opens it), is refused by a console with another credential, and
// ends 12 h after sign-in, used or not.
func TestSSOSessionAcrossRestartAndTwelveHours(t *testing.T) {
	f := newSSOFixture(t)
	first := f.start()
	f.idp.SignInAs("grace@example.com", true)
	if status, body := f.signIn(first, nil); status != 200 {
		t.Fatalf("sign in: %d %s", status, body)
	}
	restarted := f.start()
	if who := f.signedInAs(restarted); who != "grace@example.com" {
		t.Fatalf("after a restart: %q", who)
	}
	if who := f.signedInAs(f.start("another-console-credential-0123456789")); who != "" {
		t.Fatalf("a console with another key opened the session as %q", who)
	}
	f.clock.add(console.PersonSessionTTL - time.Minute)
	if who := f.signedInAs(restarted); who != "grace@example.com" {
		t.Fatalf("11 h 59 min after sign-in: %q", who)
	}
	f.clock.add(time.Minute)
	if who := f.signedInAs(restarted); who != "" {
		t.Fatalf("12 h after sign-in still %q", who)
	}
}

// An http issuer is accepted on loopback only; every field is required.
func TestSSOConfiguration(t *testing.T) {
	ok := console.SSO{Issuer: "https://id.example.com", ClientID: "c", ClientSecret: "s", PublicURL: "https://console.example.com"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid: %v", err)
	}
	for _, issuer := range []string{"http://127.0.0.1:5556", "http://localhost:5556/dex", "http://[::1]:80"} {
		c := ok
		c.Issuer = issuer
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", issuer, err)
		}
	}
	for _, issuer := range []string{"http://id.example.com", "http://10.0.0.1", "ftp://id.example.com", "", "id.example.com"} {
		c := ok
		c.Issuer = issuer
		if err := c.Validate(); err == nil {
			t.Errorf("%q accepted", issuer)
		}
	}
	if err := (console.Options{SSO: &ok}).Validate(); err == nil {
		t.Error("single sign-on without the console's accounting token accepted")
	}
}

// shows says whether a cookie's value carries s as text: as is, URL-escaped, or in
// base64 (a random sealed value may hold any short run of letters, so the whole of s
// is looked for).
func shows(value, s string) bool {
	v := strings.ToLower(value)
	for _, form := range []string{s, url.QueryEscape(s), base64.StdEncoding.EncodeToString([]byte(s)),
		base64.RawURLEncoding.EncodeToString([]byte(s))} {
		if strings.Contains(v, strings.ToLower(form)) {
			return true
		}
	}
	return false
}
