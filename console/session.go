package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/llmgw/gateway/accounting/client"
)

// sessionCookie names the session cookie: HttpOnly, SameSite=Strict, Secure over TLS
// (or always, with Options.SecureCookie).
const sessionCookie = "gw_console"

// sessionTTL is how long an admin-token session lives without use.
const sessionTTL = 8 * time.Hour

// PersonSessionTTL is how long a person's session lives after sign-in, used or not.
const PersonSessionTTL = 12 * time.Hour

// personPrefix starts the session cookie of a person (sealed); an admin-token
// session's cookie is a random id.
const personPrefix = "p."

// session is a signed-in operator: either a person (signed in with the company's
// OpenID provider; the console then presents its own credential to accounting, naming
// the person) or the holder of the admin token (kept here, server-side only: never in
// a cookie, a URL or a log), and the CSRF token every form must carry.
type session struct {
	id string
	// token is the admin token of a break-glass session; "" for a person.
	token string
	// person is the signed-in person's email; "" for the admin token.
	person string
	csrf   string
	// operator names the session in logs: the person, or for the admin token a random
	// name unrelated to the cookie or the token.
	operator string
	expires  time.Time
	forms    *forms
}

// credentials are what a call to accounting for se presents: the admin token, or the
// console's own credential naming the person.
func (se *session) credentials() credentials.PerRPCCredentials {
	if se.person != "" {
		return client.PersonCredentials(se.token, se.person)
	}
	return client.TokenCredentials(se.token)
}

// personCookie is what a person's sealed session cookie carries.
type personCookie struct {
	ID       string    `json:"id"`
	Email    string    `json:"email"`
	CSRF     string    `json:"csrf"`
	SignedIn time.Time `json:"signed_in"`
}

// sessions holds the admin-token sessions by random id, and what the console keeps in
// memory of the persons' sealed sessions: their one-time forms and the ones signed out.
type sessions struct {
	mu  sync.Mutex
	all map[string]*session
	// personForms are the one-time forms of persons' sessions, by session id; a restart
	// forgets them (a form rendered before it is refused as stale and reloaded).
	personForms map[string]*session
	// signedOut are persons' sessions ended before their time, by id, until they expire.
	signedOut map[string]time.Time
	now       func() time.Time
	// secure marks the cookie Secure on every answer (Options.SecureCookie).
	secure bool
	seal   *sealer
	// consoleToken is the console's own credential, presented for persons.
	consoleToken string
}

func newSessions(now func() time.Time, secure bool, seal *sealer, consoleToken string) *sessions {
	return &sessions{all: map[string]*session{}, personForms: map[string]*session{}, signedOut: map[string]time.Time{},
		now: now, secure: secure, seal: seal, consoleToken: consoleToken}
}

// cookie is the session cookie with value, kept for maxAge seconds (negative: deleted).
func (s *sessions) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: sessionCookie, Value: value, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: s.secure || r.TLS != nil, MaxAge: maxAge}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// prune forgets what has expired; s.mu is held.
func (s *sessions) prune() {
	now := s.now()
	for k, v := range s.all {
		if now.After(v.expires) {
			delete(s.all, k)
		}
	}
	for k, v := range s.personForms {
		if now.After(v.expires) {
			delete(s.personForms, k)
		}
	}
	for k, exp := range s.signedOut {
		if now.After(exp) {
			delete(s.signedOut, k)
		}
	}
}

// create starts an admin-token session for token, sets its cookie and returns it.
func (s *sessions) create(w http.ResponseWriter, r *http.Request, token string) *session {
	id := randomHex(32)
	se := &session{id: id, token: token, csrf: randomHex(32), operator: randomHex(6), expires: s.now().Add(sessionTTL), forms: &forms{}}
	s.mu.Lock()
	s.all[id] = se
	s.prune()
	s.mu.Unlock()
	http.SetCookie(w, s.cookie(r, id, int(sessionTTL/time.Second)))
	return se
}

// createPerson starts a person's session, sealed in its cookie, for PersonSessionTTL.
func (s *sessions) createPerson(w http.ResponseWriter, r *http.Request, email string) error {
	pc := personCookie{ID: randomHex(16), Email: email, CSRF: randomHex(32), SignedIn: s.now().UTC()}
	v, err := s.seal.seal(sessionCookie, pc)
	if err != nil {
		return err
	}
	http.SetCookie(w, s.cookie(r, personPrefix+v, int(PersonSessionTTL/time.Second)))
	return nil
}

// get returns the request's live session (an admin-token session is renewed).
func (s *sessions) get(r *http.Request) (*session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, false
	}
	if sealed, ok := strings.CutPrefix(c.Value, personPrefix); ok {
		return s.getPerson(sealed)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.all[c.Value]
	if !ok || s.now().After(se.expires) {
		delete(s.all, c.Value)
		return nil, false
	}
	se.expires = s.now().Add(sessionTTL)
	return se, true
}

// getPerson opens a person's sealed session: refused when it does not open, is older
// than PersonSessionTTL, or was signed out.
func (s *sessions) getPerson(sealed string) (*session, bool) {
	var pc personCookie
	if s.seal == nil || s.seal.open(sessionCookie, sealed, &pc) != nil || pc.ID == "" || pc.Email == "" || pc.CSRF == "" {
		return nil, false
	}
	expires := pc.SignedIn.Add(PersonSessionTTL)
	if !s.now().Before(expires) {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, out := s.signedOut[pc.ID]; out {
		return nil, false
	}
	se, ok := s.personForms[pc.ID]
	if !ok {
		se = &session{id: pc.ID, token: s.consoleToken, person: pc.Email, csrf: pc.CSRF, operator: pc.Email, expires: expires, forms: &forms{}}
		s.personForms[pc.ID] = se
		s.prune()
	}
	return se, true
}

// end forgets the request's session and clears its cookie.
func (s *sessions) end(w http.ResponseWriter, r *http.Request, se *session) {
	s.mu.Lock()
	if se.person != "" {
		s.signedOut[se.id] = se.expires
		delete(s.personForms, se.id)
	} else {
		delete(s.all, se.id)
	}
	s.mu.Unlock()
	http.SetCookie(w, s.cookie(r, "", -1))
}

// validCSRF reports whether the form's token is the session's (constant time).
func (se *session) validCSRF(r *http.Request) bool {
	got := r.PostFormValue("csrf")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(se.csrf)) == 1
}

// secureHeaders sets the strict Content-Security-Policy and its companions on every
// answer: nothing but this origin's own styles and images, no scripts at all, no
// framing, forms posting only here.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}
