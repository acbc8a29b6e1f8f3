package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"sync"
	"time"
)

// sessionCookie names the session cookie: HttpOnly, SameSite=Strict, Secure over TLS
// (or always, with Options.SecureCookie).
const sessionCookie = "gw_console"

// sessionTTL is how long a session lives without use.
const sessionTTL = 8 * time.Hour

// session is a signed-in operator: the admin token (kept here, server-side only: never
// in a cookie, a URL or a log) and the CSRF token every form must carry.
type session struct {
	token string
	csrf  string
	// operator names the session in logs: random, unrelated to the cookie or the token.
	operator string
	expires  time.Time
	forms    forms
}

// sessions holds the live sessions by random id.
type sessions struct {
	mu  sync.Mutex
	all map[string]*session
	now func() time.Time
	// secure marks the cookie Secure on every answer (Options.SecureCookie).
	secure bool
}

func newSessions(now func() time.Time, secure bool) *sessions {
	return &sessions{all: map[string]*session{}, now: now, secure: secure}
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

// create starts a session for token, sets its cookie and returns it.
func (s *sessions) create(w http.ResponseWriter, r *http.Request, token string) *session {
	id := randomHex(32)
	se := &session{token: token, csrf: randomHex(32), operator: randomHex(6), expires: s.now().Add(sessionTTL)}
	s.mu.Lock()
	s.all[id] = se
	for k, v := range s.all {
		if s.now().After(v.expires) {
			delete(s.all, k)
		}
	}
	s.mu.Unlock()
	http.SetCookie(w, s.cookie(r, id, int(sessionTTL/time.Second)))
	return se
}

// get returns the request's live session, renewing it.
func (s *sessions) get(r *http.Request) (*session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, false
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

// end forgets the request's session and clears its cookie.
func (s *sessions) end(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.mu.Lock()
		delete(s.all, c.Value)
		s.mu.Unlock()
	}
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
