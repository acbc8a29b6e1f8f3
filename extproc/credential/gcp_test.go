package credential

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/cloudauth"
)

// tokenServer is a token endpoint for a fresh service account: it counts token
// requests, and holds each one while gate is closed.
type tokenServer struct {
	issuer   *cloudauth.TokenIssuer
	account  *cloudauth.ServiceAccount
	requests atomic.Int32
	gate     chan struct{}
	gateMu   sync.Mutex
}

// hold makes token requests wait until the returned release is called (or the test ends).
func (ts *tokenServer) hold(t *testing.T) (release func()) {
	ts.gateMu.Lock()
	defer ts.gateMu.Unlock()
	g := make(chan struct{})
	ts.gate = g
	var once sync.Once
	release = func() { once.Do(func() { close(g) }) }
	t.Cleanup(release) // before the server closes: it waits for its handlers
	return release
}

func newTokenServer(t *testing.T, ttl time.Duration) *tokenServer {
	t.Helper()
	ts := &tokenServer{gate: make(chan struct{})}
	close(ts.gate)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.requests.Add(1)
		ts.gateMu.Lock()
		g := ts.gate
		ts.gateMu.Unlock()
		<-g
		ts.issuer.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	acct, err := cloudauth.NewServiceAccount("gateway@demo-project.iam.gserviceaccount.com", srv.URL+"/token")
	if err != nil {
		t.Fatal(err)
	}
	ts.account = acct
	ts.issuer = &cloudauth.TokenIssuer{Email: acct.Email, PublicKey: acct.PublicKey, Audience: srv.URL + "/token", TTL: ttl}
	return ts
}

// bearer is the token c sends.
func bearer(t *testing.T, c *GCP) string {
	t.Helper()
	hs, err := c.Headers(context.Background(), Request{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].Name != HeaderAuthorization || !strings.HasPrefix(hs[0].Value, "Bearer ya29.mock-") {
		t.Fatalf("headers %v", hs)
	}
	return strings.TrimPrefix(hs[0].Value, "Bearer ")
}

func TestGCPTokenCachedAndRefreshedInBackground(t *testing.T) {
	ts := newTokenServer(t, time.Hour)
	c, err := NewGCP(GCPConfig{ServiceAccountJSON: ts.account.JSON})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now()
	c.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	first := bearer(t, c) // nothing cached: minted on the path
	if !ts.issuer.Valid(first) || ts.requests.Load() != 1 {
		t.Fatalf("first token valid=%v after %d token requests", ts.issuer.Valid(first), ts.requests.Load())
	}
	for range 5 {
		if got := bearer(t, c); got != first {
			t.Fatal("a cached token was not reused")
		}
	}
	if n := ts.requests.Load(); n != 1 {
		t.Fatalf("%d token requests while a valid token is cached", n)
	}
	// A second credential over the same file (a catalog reload) shares the cache.
	again, err := NewGCP(GCPConfig{ServiceAccountJSON: ts.account.JSON})
	if err != nil {
		t.Fatal(err)
	}
	if got := bearer(t, again); got != first || ts.requests.Load() != 1 {
		t.Fatal("a reload of the same service account minted again")
	}

	// Within the refresh window, while the token endpoint hangs: the request still
	// gets the cached token at once, and one refresh runs in the background.
	release := ts.hold(t)
	advance(time.Hour - gcpRefreshBefore + time.Second)
	done := make(chan string)
	go func() { done <- bearer(t, c) }()
	select {
	case got := <-done:
		if got != first {
			t.Fatal("the request did not get the cached token")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request waited for the token endpoint although a valid token was cached")
	}
	waitFor(t, func() bool { return ts.requests.Load() == 2 })
	bearer(t, c) // a refresh is already running: no second one
	release()
	var second string
	waitFor(t, func() bool { second = bearer(t, c); return second != first })
	if !ts.issuer.Valid(second) || ts.requests.Load() != 2 {
		t.Fatalf("refreshed token valid=%v after %d token requests", ts.issuer.Valid(second), ts.requests.Load())
	}
}

func TestGCPExpiredTokenMintedOnPath(t *testing.T) {
	ts := newTokenServer(t, time.Hour)
	c, err := NewGCP(GCPConfig{ServiceAccountJSON: ts.account.JSON})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now()
	var offset atomic.Int64
	c.now = func() time.Time { return base.Add(time.Duration(offset.Load())) }
	first := bearer(t, c)
	offset.Store(int64(time.Hour - gcpMinValidity + time.Second)) // too close to expiry to send
	if got := bearer(t, c); got == first || ts.requests.Load() != 2 {
		t.Fatalf("an almost expired token was sent (%d token requests)", ts.requests.Load())
	}
}

func TestGCPTokenRefusedIsAnError(t *testing.T) {
	ts := newTokenServer(t, time.Hour)
	other, err := cloudauth.NewServiceAccount(ts.account.Email, ts.issuer.Audience)
	if err != nil {
		t.Fatal(err)
	}
	// The endpoint knows another key: the grant's signature does not verify.
	c, err := NewGCP(GCPConfig{ServiceAccountJSON: other.JSON})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Headers(context.Background(), Request{})
	if err == nil {
		t.Fatal("a refused grant gave a token")
	}
	if strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Fatalf("error shows the key: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
