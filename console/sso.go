package console

// Single sign-on: people sign in with the company's OpenID Connect provider by the
// authorization code flow with PKCE (S256), scopes "openid email". The sign-in under way
// (state, nonce, PKCE verifier) lives ten minutes in a sealed cookie of its own, sent
// back on the provider's redirect (SameSite=Lax: the redirect is a cross-site
// navigation) and used once. The callback checks the state, exchanges the code with the
// verifier, verifies the ID token (the issuer's JWKS signature, iss, aud, exp), its
// nonce and email_verified; the person is the token's email, in lower case.

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/zap"
	"golang.org/x/oauth2"
)

// SSO configures sign-in with an OpenID Connect provider.
type SSO struct {
	// Issuer is the provider's issuer URL: https, or http on a loopback host only.
	Issuer string
	// ClientID and ClientSecret are the console's client at the provider.
	ClientID, ClientSecret string
	// PublicURL is where browsers reach the console; the redirect is
	// {PublicURL}/auth/callback.
	PublicURL string
	// HTTPClient reaches the provider (nil: one with a 10 s timeout).
	HTTPClient *http.Client
}

// authCookie names the cookie of a sign-in under way.
const authCookie = "gw_console_auth"

// authTTL is how long a sign-in under way may take at the provider.
const authTTL = 10 * time.Minute

// maxEmailBytes bounds a person's email (RFC 5321's path limit).
const maxEmailBytes = 254

// Validate reports every problem with the configuration at once.
func (c SSO) Validate() error {
	var errs []error
	if err := checkIssuer(c.Issuer); err != nil {
		errs = append(errs, err)
	}
	if c.ClientID == "" {
		errs = append(errs, errors.New("the OIDC client id is missing"))
	}
	if c.ClientSecret == "" {
		errs = append(errs, errors.New("the OIDC client secret is missing"))
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, errors.New("the public URL must be an absolute http(s) URL"))
	}
	return errors.Join(errs...)
}

// checkIssuer accepts an https issuer, or an http one on a loopback host.
func checkIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return fmt.Errorf("the OIDC issuer %q is not an absolute URL", issuer)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("the OIDC issuer %q is http on a host that is not loopback: use https", issuer)
	}
	return fmt.Errorf("the OIDC issuer %q must be https (http on loopback only)", issuer)
}

// sso is the configured provider, discovered on first use (and again after a failed
// discovery), so the console starts while the provider is away.
type sso struct {
	cfg    SSO
	client *http.Client
	now    func() time.Time

	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

func newSSO(c SSO, now func() time.Time) *sso {
	client := c.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &sso{cfg: c, client: client, now: now}
}

// ctx carries the HTTP client to go-oidc and oauth2.
func (o *sso) ctx(parent context.Context) context.Context {
	return oidc.ClientContext(parent, o.client)
}

// discover returns the provider's OAuth 2 configuration and ID token verifier.
func (o *sso) discover(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.oauth != nil {
		return o.oauth, o.verifier, nil
	}
	// The key set keeps the client of this context for its later fetches.
	p, err := oidc.NewProvider(o.ctx(ctx), o.cfg.Issuer)
	if err != nil {
		return nil, nil, err
	}
	o.oauth = &oauth2.Config{ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: strings.TrimSuffix(o.cfg.PublicURL, "/") + "/auth/callback", Scopes: []string{oidc.ScopeOpenID, "email"}}
	o.verifier = p.Verifier(&oidc.Config{ClientID: o.cfg.ClientID, Now: o.now})
	return o.oauth, o.verifier, nil
}

// pendingSignIn is what the auth cookie carries.
type pendingSignIn struct {
	State    string    `json:"state"`
	Nonce    string    `json:"nonce"`
	Verifier string    `json:"verifier"`
	Expires  time.Time `json:"expires"`
}

func (s *Server) authCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: authCookie, Value: value, Path: "/auth/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.opts.SecureCookie || r.TLS != nil, MaxAge: maxAge}
}

// ssoSignIn sends the browser to the provider's sign-in.
func (s *Server) ssoSignIn(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	cfg, _, err := s.sso.discover(ctx)
	if err != nil {
		s.log.Warn("console sign-in: the OpenID provider cannot be reached", zap.Error(err))
		render(w, http.StatusBadGateway, "error", page{Title: "Sign in", Error: "The sign-in provider cannot be reached; try again."})
		return
	}
	p := pendingSignIn{State: randomHex(24), Nonce: randomHex(24), Verifier: oauth2.GenerateVerifier(), Expires: s.opts.Now().Add(authTTL)}
	v, err := s.sessions.seal.seal(authCookie, p)
	if err != nil {
		render(w, http.StatusInternalServerError, "error", page{Title: "Sign in", Error: "The sign-in could not start."})
		return
	}
	http.SetCookie(w, s.authCookie(r, v, int(authTTL/time.Second)))
	http.Redirect(w, r, cfg.AuthCodeURL(p.State, oidc.Nonce(p.Nonce), oauth2.S256ChallengeOption(p.Verifier)), http.StatusFound)
}

// idClaims are the ID token's claims the console reads.
type idClaims struct {
	Email         string `json:"email"`
	EmailVerified *bool  `json:"email_verified"`
}

// ssoCallback ends a sign-in: the provider sent the browser back with a code.
func (s *Server) ssoCallback(w http.ResponseWriter, r *http.Request) {
	addr := clientAddr(r)
	http.SetCookie(w, s.authCookie(r, "", -1)) // one use, whatever happens
	fail := func(status int, why, msg string) {
		s.signIns.lim.Failed(addr, s.signIns.now())
		s.log.Warn("console sign-in refused", zap.String("remote", addr), zap.String("why", why))
		render(w, status, "ssofailed", page{Title: "Sign in", Error: msg})
	}
	if wait := s.signIns.lim.Blocked(addr, s.signIns.now()); wait > 0 {
		s.log.Warn("console sign-in refused", zap.String("remote", addr), zap.String("why", "too many failed attempts"))
		render(w, http.StatusTooManyRequests, "ssofailed", page{Title: "Sign in", Error: "Too many failed sign-ins from this address: wait a little and try again."})
		return
	}
	var p pendingSignIn
	c, err := r.Cookie(authCookie)
	if err != nil || s.sessions.seal.open(authCookie, c.Value, &p) != nil || !s.opts.Now().Before(p.Expires) {
		fail(http.StatusBadRequest, "no sign-in under way", "This sign-in expired or was not started here: start again.")
		return
	}
	q := r.URL.Query()
	if state := q.Get("state"); state == "" || subtle.ConstantTimeCompare([]byte(state), []byte(p.State)) != 1 {
		fail(http.StatusBadRequest, "wrong state", "This sign-in does not match the one started here: start again.")
		return
	}
	if e := q.Get("error"); e != "" {
		fail(http.StatusUnauthorized, "provider: "+e, "The sign-in provider refused the sign-in.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	cfg, verifier, err := s.sso.discover(ctx)
	if err != nil {
		s.log.Warn("console sign-in: the OpenID provider cannot be reached", zap.Error(err))
		render(w, http.StatusBadGateway, "ssofailed", page{Title: "Sign in", Error: "The sign-in provider cannot be reached; try again."})
		return
	}
	tok, err := cfg.Exchange(s.sso.ctx(ctx), q.Get("code"), oauth2.VerifierOption(p.Verifier))
	if err != nil {
		fail(http.StatusUnauthorized, "code exchange: "+err.Error(), "The sign-in provider did not confirm the sign-in: start again.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		fail(http.StatusUnauthorized, "no id_token", "The sign-in provider did not say who signed in.")
		return
	}
	idt, err := verifier.Verify(s.sso.ctx(ctx), raw)
	if err != nil {
		fail(http.StatusUnauthorized, "id_token: "+err.Error(), "The sign-in could not be verified.")
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(p.Nonce)) != 1 {
		fail(http.StatusUnauthorized, "wrong nonce", "The sign-in could not be verified.")
		return
	}
	var cl idClaims
	if err := idt.Claims(&cl); err != nil {
		fail(http.StatusUnauthorized, "claims: "+err.Error(), "The sign-in could not be verified.")
		return
	}
	email := strings.ToLower(strings.TrimSpace(cl.Email))
	if email == "" || len(email) > maxEmailBytes || strings.ContainsAny(email, " \t\r\n<>\"") || !strings.Contains(email, "@") {
		fail(http.StatusUnauthorized, "no usable email", "The sign-in provider did not give an email address.")
		return
	}
	if cl.EmailVerified == nil || !*cl.EmailVerified {
		fail(http.StatusUnauthorized, "email not verified", "Your email address is not verified by the sign-in provider.")
		return
	}
	if err := s.sessions.createPerson(w, r, email); err != nil {
		render(w, http.StatusInternalServerError, "error", page{Title: "Sign in", Error: "The session could not be started."})
		return
	}
	s.log.Info("console sign-in", zap.String("operator", email), zap.String("remote", addr))
	// A page, not a redirect: the browser arrived here from the provider (another
	// site), and the session cookie (SameSite=Strict) is sent from the next same-site
	// navigation on, which the page's refresh is.
	render(w, http.StatusOK, "signedin", page{Title: "Signed in", Data: email})
}
