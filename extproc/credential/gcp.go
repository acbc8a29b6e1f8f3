package credential

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// GCPScope is the OAuth2 scope Vertex AI accepts.
const GCPScope = "https://www.googleapis.com/auth/cloud-platform"

// Token timing. Google's access tokens live an hour. A token is refreshed in the
// background once less than gcpRefreshBefore of it is left, so requests keep using the
// cached one meanwhile; one with less than gcpMinValidity left is not sent (it could
// expire on the way) and is replaced on the request's path. A failed background refresh
// is retried no sooner than gcpRetryAfter, so a down token endpoint is not called at the
// request rate.
const (
	gcpRefreshBefore = 10 * time.Minute
	gcpMinValidity   = time.Minute
	gcpRetryAfter    = 10 * time.Second
	gcpMintTimeout   = 10 * time.Second
)

// GCP sends a Google service account's access token as a bearer token.
type GCP struct {
	*tokenCache
	email string
}

// tokens are the token caches of the service accounts in use, keyed by the key file's
// content: a catalog reload that re-reads an unchanged file keeps its cached token (no
// mint on the first request after the reload); a rotated file is a new cache.
var tokens sync.Map // [sha256.Size]byte → *tokenCache

// NewGCP returns the credential of the service account c.
func NewGCP(c GCPConfig) (*GCP, error) {
	if len(c.ServiceAccountJSON) == 0 {
		return nil, errMissing("gcp service account file")
	}
	// JWTConfigFromJSON accepts only type "service_account", whose token_uri the JWT
	// bearer grant is sent to.
	cfg, err := google.JWTConfigFromJSON(c.ServiceAccountJSON, GCPScope)
	if err != nil {
		return nil, fmt.Errorf("credential: gcp service account file is not a service account key")
	}
	if cfg.Email == "" || len(cfg.PrivateKey) == 0 {
		return nil, fmt.Errorf("credential: gcp service account file lacks client_email or private_key")
	}
	key := sha256.Sum256(c.ServiceAccountJSON)
	tc, _ := tokens.LoadOrStore(key, newTokenCache(func(ctx context.Context) (*oauth2.Token, error) {
		// A fresh token source each time: the library's own sources cache, and a
		// refresh must mint a new token while the cached one is still valid.
		ctx = context.WithValue(ctx, oauth2.HTTPClient, tokenClient)
		return cfg.TokenSource(ctx).Token()
	}, time.Now))
	return &GCP{tokenCache: tc.(*tokenCache), email: cfg.Email}, nil
}

// tokenClient calls token endpoints.
var tokenClient = &http.Client{Timeout: gcpMintTimeout}

// Headers is the bearer token; see tokenCache.token for when it is minted.
func (g *GCP) Headers(ctx context.Context, _ Request) ([]Header, error) {
	t, err := g.token(ctx)
	if err != nil {
		return nil, err
	}
	return []Header{{HeaderAuthorization, "Bearer " + t}}, nil
}

// String names the service account, never its key or token.
func (g *GCP) String() string { return "gcp service account " + g.email }

// tokenCache holds one service account's access token. Safe for concurrent use.
type tokenCache struct {
	mint func(context.Context) (*oauth2.Token, error)
	now  func() time.Time

	mu         sync.Mutex
	tok        *oauth2.Token
	refreshing bool
	retryAt    time.Time  // no background refresh before
	minting    sync.Mutex // one mint on the request path at a time
}

func newTokenCache(mint func(context.Context) (*oauth2.Token, error), now func() time.Time) *tokenCache {
	return &tokenCache{mint: mint, now: now}
}

// token is the cached access token while it has gcpMinValidity left, starting a
// background refresh when it is within gcpRefreshBefore of its expiry; only without a
// usable cached token is one minted on the caller's path.
func (c *tokenCache) token(ctx context.Context) (string, error) {
	if t, ok := c.cached(); ok {
		return t, nil
	}
	c.minting.Lock()
	defer c.minting.Unlock()
	if t, ok := c.cached(); ok { // minted by the request we waited for
		return t, nil
	}
	tok, err := c.mint(ctx)
	if err != nil {
		return "", fmt.Errorf("credential: gcp access token: %w", err)
	}
	c.store(tok)
	return tok.AccessToken, nil
}

// cached is the usable cached token, and starts the background refresh it is due.
func (c *tokenCache) cached() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok == nil {
		return "", false
	}
	now := c.now()
	if c.tok.Expiry.IsZero() {
		return c.tok.AccessToken, true
	}
	left := c.tok.Expiry.Sub(now)
	if left < gcpMinValidity {
		return "", false
	}
	if left < gcpRefreshBefore && !c.refreshing && !now.Before(c.retryAt) {
		c.refreshing = true
		go c.refresh()
	}
	return c.tok.AccessToken, true
}

// refresh mints a token off the request path.
func (c *tokenCache) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), gcpMintTimeout)
	defer cancel()
	tok, err := c.mint(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshing = false
	if err != nil {
		c.retryAt = c.now().Add(gcpRetryAfter)
		return
	}
	c.tok = tok
}

func (c *tokenCache) store(tok *oauth2.Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tok = tok
}
