package cloudauth

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWTBearerGrant is the OAuth2 grant type of a service account's token request
// (RFC 7523).
const JWTBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// TokenIssuer is a token endpoint for one service account: it verifies a JWT bearer
// grant with the account's public key (RS256, issuer the account's email, audience the
// endpoint's URL, a scope, unexpired) and issues an opaque access token that Valid
// recognises until it expires. Safe for concurrent use.
type TokenIssuer struct {
	Email     string
	PublicKey *rsa.PublicKey
	// Audience is the endpoint's URL as the key file's token_uri names it; empty means
	// the URL the request was sent to (http://host/path).
	Audience string
	// TTL is the issued tokens' lifetime (Google's: an hour).
	TTL time.Duration
	Now func() time.Time

	mu     sync.Mutex
	tokens map[string]time.Time // token → expiry
	issued int
}

// ServeHTTP answers a token request the way Google's endpoint does: 200 with
// access_token, token_type and expires_in, or 400 with error and error_description.
func (t *TokenIssuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	refuse := func(code, desc string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
	}
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		refuse("invalid_request", "Expected a form POST.")
		return
	}
	if r.PostForm.Get("grant_type") != JWTBearerGrant {
		refuse("unsupported_grant_type", "Invalid grant_type.")
		return
	}
	aud := t.Audience
	if aud == "" {
		aud = "http://" + r.Host + r.URL.Path
	}
	if t.PublicKey == nil || t.verify(r.PostForm.Get("assertion"), aud) != nil {
		refuse("invalid_grant", "Invalid JWT Signature.")
		return
	}
	tok := t.issue()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": tok, "token_type": "Bearer", "expires_in": int(t.TTL.Seconds()),
	})
}

func (t *TokenIssuer) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// verify checks the grant's JWT.
func (t *TokenIssuer) verify(assertion, aud string) error {
	var claims struct {
		jwt.RegisteredClaims
		Scope string `json:"scope"`
	}
	_, err := jwt.ParseWithClaims(assertion, &claims, func(*jwt.Token) (any, error) { return t.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(t.Email), jwt.WithAudience(aud),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithTimeFunc(t.now))
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(claims.Scope), "https://www.googleapis.com/auth/cloud-platform") {
		return jwt.ErrTokenInvalidClaims
	}
	return nil
}

func (t *TokenIssuer) issue() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	tok := "ya29.mock-" + hex.EncodeToString(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tokens == nil {
		t.tokens = map[string]time.Time{}
	}
	now := t.now()
	for k, exp := range t.tokens { // forget expired tokens
		if !now.Before(exp) {
			delete(t.tokens, k)
		}
	}
	t.tokens[tok] = now.Add(t.TTL)
	t.issued++
	return tok
}

// Valid reports whether tok was issued here and has not expired.
func (t *TokenIssuer) Valid(tok string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	exp, ok := t.tokens[tok]
	return ok && t.now().Before(exp)
}

// Issued is how many tokens were issued.
func (t *TokenIssuer) Issued() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.issued
}
