// Package oidctest is a small OpenID Connect provider for tests of the console's
// single sign-on: discovery, a JWKS, an authorization endpoint that signs in whoever
// the test names (no page, no consent), and a token endpoint that checks the client,
// the code (once), the redirect URI and the PKCE verifier (S256), and answers an ID
// token signed with ES256. A test may tamper with the next ID token (its claims, or
// the key that signs it) to see the console refuse it.
//
// Offered a list of people (Offer), its authorization endpoint instead shows a page to
// pick whom to sign in as: the local stack runs it so (e2e/cmd/oidcprovider, `make run
// OIDC=1`) for trying sign-in by hand. It checks no password: it is never part of a
// deployment. It imports nothing of the gateway.
package oidctest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Claims are an ID token's claims as the provider issues them.
type Claims struct {
	Issuer        string   `json:"iss"`
	Subject       string   `json:"sub"`
	Audience      []string `json:"aud"`
	Expiry        int64    `json:"exp"`
	IssuedAt      int64    `json:"iat"`
	Nonce         string   `json:"nonce,omitempty"`
	Email         string   `json:"email,omitempty"`
	EmailVerified *bool    `json:"email_verified,omitempty"`
}

// Token is the next ID token before it is signed: a tamper function may change its
// claims, or sign it with a key the JWKS does not publish (Forge).
type Token struct {
	Claims Claims
	Forge  bool
}

// grant is a code issued by the authorization endpoint.
type grant struct {
	clientID, redirect, challenge, nonce string
	email                                string
	verified                             bool
	expires                              time.Time
}

// Provider is a running test provider.
type Provider struct {
	// URL is the issuer (http on loopback).
	URL                    string
	ClientID, ClientSecret string

	srv   *httptest.Server
	key   *ecdsa.PrivateKey
	other *ecdsa.PrivateKey

	mu       sync.Mutex
	people   []Person
	email    string
	verified bool
	tamper   func(*Token)
	codes    map[string]grant
	// Authorizations counts the visits to the authorization endpoint.
	authorizations int
}

// kid names the provider's one signing key.
const kid = "oidctest-1"

// Start runs a provider for one client until the test ends. Nobody is signed in
// until SignInAs.
func Start(t testing.TB, clientID, clientSecret string) *Provider {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	p, err := New("http://"+srv.Listener.Addr().String(), clientID, clientSecret)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = p.Handler()
	srv.Start()
	p.srv = srv
	t.Cleanup(srv.Close)
	return p
}

// New returns a provider whose issuer is issuer (where its Handler is served), for one
// client, with a fresh signing key. Nobody is signed in until SignInAs or Offer.
func New(issuer, clientID, clientSecret string) (*Provider, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &Provider{URL: strings.TrimRight(issuer, "/"), ClientID: clientID, ClientSecret: clientSecret, key: key, other: other, codes: map[string]grant{}}, nil
}

// Handler serves the provider's endpoints: discovery, the JWKS, authorization and
// token.
func (p *Provider) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	return mux
}

// Person is someone the provider offers to sign in, with a note shown beside the
// address (their role, say). Their address counts as verified.
type Person struct{ Email, Note string }

// Offer makes the authorization endpoint show a page listing people, each a link that
// signs that person in, while SignInAs names nobody.
func (p *Provider) Offer(people []Person) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.people = append([]Person(nil), people...)
}

// choosePage lists the people offered; each link repeats the authorization request
// with login set to the person.
var choosePage = template.Must(template.New("choose").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · local OpenID provider</title></head><body>
<h1>Local OpenID provider</h1><p>Sign in to the console as (no password: a provider for trying sign-in on this machine only):</p>
<ul id="people">{{range .}}<li><a href="{{.Link}}" id="as-{{.Email}}">{{.Email}}</a> {{.Note}}</li>{{end}}</ul></body></html>
`))

// offered answers whether email is offered, and whether anyone is.
func (p *Provider) offered(email string) (found, any bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pe := range p.people {
		if strings.EqualFold(pe.Email, email) {
			return true, true
		}
	}
	return false, len(p.people) > 0
}

// SignInAs makes the authorization endpoint sign in email from now on, its address
// verified or not.
func (p *Provider) SignInAs(email string, verified bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.email, p.verified = email, verified
}

// TamperNext changes the next ID token the token endpoint issues (once).
func (p *Provider) TamperNext(f func(*Token)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tamper = f
}

// Authorizations is how many times a browser was sent to the authorization endpoint.
func (p *Provider) Authorizations() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.authorizations
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, map[string]any{
		"issuer":                                p.URL,
		"authorization_endpoint":                p.URL + "/authorize",
		"token_endpoint":                        p.URL + "/token",
		"jwks_uri":                              p.URL + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"scopes_supported":                      []string{"openid", "email"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.key.PublicKey, KeyID: kid, Algorithm: "ES256", Use: "sig"}}})
}

func random() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// authorize checks the request as a provider would and sends the browser back with a
// code for the person SignInAs named (or access_denied when nobody is).
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	p.authorizations++
	email, verified := p.email, p.verified
	p.mu.Unlock()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Host == "" || q.Get("client_id") != p.ClientID {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	back := func(v url.Values) {
		v.Set("state", q.Get("state"))
		redirect.RawQuery = v.Encode()
		http.Redirect(w, r, redirect.String(), http.StatusFound)
	}
	scopes := strings.Fields(q.Get("scope"))
	switch {
	case q.Get("response_type") != "code", !contains(scopes, "openid"), !contains(scopes, "email"):
		back(url.Values{"error": {"invalid_request"}})
		return
	case q.Get("code_challenge_method") != "S256", q.Get("code_challenge") == "":
		back(url.Values{"error": {"invalid_request"}, "error_description": {"PKCE S256 required"}})
		return
	}
	if email == "" {
		found, anyone := p.offered(q.Get("login"))
		switch {
		case found:
			email, verified = q.Get("login"), true
		case anyone:
			p.choose(w, r)
			return
		default:
			back(url.Values{"error": {"access_denied"}})
			return
		}
	}
	code := random()
	p.mu.Lock()
	p.codes[code] = grant{clientID: p.ClientID, redirect: redirect.String(), challenge: q.Get("code_challenge"), nonce: q.Get("nonce"),
		email: email, verified: verified, expires: time.Now().Add(time.Minute)}
	p.mu.Unlock()
	redirect.RawQuery = ""
	back(url.Values{"code": {code}})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// token exchanges a code, once, for the ID token.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, 400, map[string]string{"error": "invalid_request"})
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
	}
	if id != p.ClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(p.ClientSecret)) != 1 {
		writeJSON(w, 401, map[string]string{"error": "invalid_client"})
		return
	}
	p.mu.Lock()
	g, found := p.codes[r.PostFormValue("code")]
	delete(p.codes, r.PostFormValue("code"))
	tamper := p.tamper
	p.tamper = nil
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
	switch {
	case r.PostFormValue("grant_type") != "authorization_code", !found, time.Now().After(g.expires),
		r.PostFormValue("redirect_uri") != g.redirect,
		base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
		return
	}
	now := time.Now()
	verified := g.verified
	tok := Token{Claims: Claims{Issuer: p.URL, Subject: "sub-" + g.email, Audience: []string{p.ClientID}, Expiry: now.Add(5 * time.Minute).Unix(),
		IssuedAt: now.Unix(), Nonce: g.nonce, Email: g.email, EmailVerified: &verified}}
	if tamper != nil {
		tamper(&tok)
	}
	key := p.key
	if tok.Forge {
		key = p.other
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		writeJSON(w, 500, map[string]string{"error": "server_error"})
		return
	}
	payload, _ := json.Marshal(tok.Claims)
	obj, err := signer.Sign(payload)
	if err != nil {
		writeJSON(w, 500, map[string]string{"error": "server_error"})
		return
	}
	raw, _ := obj.CompactSerialize()
	writeJSON(w, 200, map[string]any{"access_token": random(), "token_type": "Bearer", "expires_in": 300, "id_token": raw})
}

// choose shows the page of the people offered.
func (p *Provider) choose(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	people := append([]Person(nil), p.people...)
	p.mu.Unlock()
	type row struct{ Email, Note, Link string }
	rows := make([]row, 0, len(people))
	for _, pe := range people {
		q := r.URL.Query()
		q.Set("login", pe.Email)
		rows = append(rows, row{pe.Email, pe.Note, "/authorize?" + q.Encode()})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = choosePage.Execute(w, rows)
}
