package lifecycle_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/tidwall/gjson"
)

// limitRig is a Service with the default AuthFailures on a clock the test moves, and
// the outcomes it reported.
type limitRig struct {
	t        *testing.T
	svc      *lifecycle.Service
	f        *replay.FakeLedger
	now      time.Time
	observed map[apierr.Code]int
	seq      int
}

const (
	flooder   = "203.0.113.7"
	neighbour = "203.0.113.8"
	// freshKey is valid but never used before the flood.
	freshKey = "gw-fresh000000000000000000000000000000000000000"
)

func newLimitRig(t *testing.T) *limitRig {
	g := &limitRig{t: t, f: &replay.FakeLedger{}, now: time.Unix(1000, 0), observed: map[apierr.Code]int{}}
	g.f.AddKey(secKey, ledger.Grant{KeyID: "k-sec", AccountID: "a-sec", Tier: "default", AccountToppedUp: true})
	g.f.AddKey(freshKey, ledger.Grant{KeyID: "k-fresh", AccountID: "a-sec", Tier: "default", AccountToppedUp: true})
	g.svc = replay.Service(t, g.f, func(c *lifecycle.Config) {
		c.Now = func() time.Time { return g.now }
		c.ObserveAuthFailure = func(code apierr.Code) { g.observed[code]++ }
	})
	return g
}

// badKey is a new well-formed key accounting does not know.
func (g *limitRig) badKey() string {
	g.seq++
	return fmt.Sprintf("gw-%043d", g.seq)
}

// send makes one request from addr; key "" sends none. It returns the immediate answer
// (nil: the request was let through upstream).
func (g *limitRig) send(addr, method, path, key string) *lifecycle.Immediate {
	r := g.svc.NewRequest()
	ctx := context.Background()
	hs := []lifecycle.Header{{":method", method}, {":path", path}, {"content-type", "application/json"},
		{"x-forwarded-for", "198.51.100.1," + addr}, {"x-envoy-external-address", addr}}
	if key != "" {
		hs = append(hs, lifecycle.Header{Name: "authorization", Value: "Bearer " + key})
	}
	a := r.RequestHeaders(ctx, hs, method == "GET")
	if a.Immediate == nil && method == "POST" {
		body := `{"model":"demo-chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
		if strings.HasPrefix(path, "/v1/chat") {
			body = `{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`
		}
		a = r.RequestBody(ctx, []byte(body), true)
	}
	r.End(ctx, "done")
	return a.Immediate
}

func (g *limitRig) chat(addr, key string) *lifecycle.Immediate {
	return g.send(addr, "POST", "/v1/chat/completions", key)
}

// flood sends n bad keys from addr and returns how many were answered 401.
func (g *limitRig) flood(addr string, n int) int {
	n401 := 0
	for range n {
		if a := g.chat(addr, g.badKey()); a != nil && a.Status == 401 {
			n401++
		}
	}
	return n401
}

func served(a *lifecycle.Immediate) bool { return a == nil || a.Status == 200 }

func header(a *lifecycle.Immediate, name string) string {
	for _, h := range a.Headers {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// wantLimited checks a 429 rate_limit_exceeded in the spec's envelope for the endpoint.
func wantLimited(t *testing.T, a *lifecycle.Immediate, anthropic bool) {
	t.Helper()
	if a == nil || a.Status != 429 {
		t.Fatalf("answer %+v, want 429", a)
	}
	// A valid key not checked yet gets this answer too: it must not be called invalid.
	if msg := gjson.GetBytes(a.Body, "error.message").String(); strings.Contains(strings.ToLower(msg), "invalid") || !strings.Contains(msg, "failed API keys") {
		t.Errorf("message %q: want the address's failed keys named, no key called invalid", msg)
	}
	if v := header(a, "retry-after"); v != "1" {
		t.Errorf("retry-after %q, want 1 (one token a second)", v)
	}
	if anthropic {
		if gjson.GetBytes(a.Body, "type").String() != "error" || gjson.GetBytes(a.Body, "error.type").String() != "rate_limit_error" {
			t.Errorf("body %s, want the Anthropic rate_limit_error envelope", a.Body)
		}
		return
	}
	if header(a, "x-should-retry") != "true" {
		t.Errorf("x-should-retry %q, want true", header(a, "x-should-retry"))
	}
	if gjson.GetBytes(a.Body, "error.code").String() != "rate_limit_exceeded" || gjson.GetBytes(a.Body, "error.type").String() != "rate_limit_error" ||
		!gjson.GetBytes(a.Body, "error.retryable").Bool() {
		t.Errorf("body %s, want rate_limit_exceeded, rate_limit_error, retryable", a.Body)
	}
}

// TestAuthFailureLimit: the per-address bound on failed keys applies to failed keys
// only. A burst of 100 bad keys is answered 401 by default; beyond it failed keys get
// 429 rate_limit_exceeded without an accounting call, while valid keys, requests that
// need no key and other addresses are served.
func TestAuthFailureLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, g *limitRig)
	}{
		{"100 bad keys: all 401", func(t *testing.T, g *limitRig) {
			if n := g.flood(flooder, 100); n != 100 {
				t.Fatalf("%d of 100 answered 401", n)
			}
			if g.observed[apierr.InvalidAPIKey] != 100 || g.observed[apierr.RateLimitExceeded] != 0 {
				t.Errorf("observed %v", g.observed)
			}
		}},
		{"beyond the burst: 429 without accounting", func(t *testing.T, g *limitRig) {
			g.flood(flooder, 100)
			auths := g.f.Auths
			wantLimited(t, g.chat(flooder, g.badKey()), false)
			wantLimited(t, g.send(flooder, "POST", "/v1/messages", g.badKey()), true)
			wantLimited(t, g.chat(flooder, ""), false)
			wantLimited(t, g.chat(flooder, "sk-not-ours"), false)
			if g.f.Auths != auths {
				t.Errorf("accounting asked %d times for a limited address", g.f.Auths-auths)
			}
			if g.observed[apierr.RateLimitExceeded] != 4 {
				t.Errorf("observed %v", g.observed)
			}
		}},
		{"valid key after the flood: served", func(t *testing.T, g *limitRig) {
			if a := g.chat(flooder, secKey); !served(a) {
				t.Fatalf("before the flood: %+v", a)
			}
			g.flood(flooder, 1000)
			for i := range 3 {
				if a := g.chat(flooder, secKey); !served(a) {
					t.Fatalf("request %d after the flood: %d %s", i, a.Status, a.Body)
				}
			}
		}},
		{"valid key first seen after the flood: served on its retry", func(t *testing.T, g *limitRig) {
			g.flood(flooder, 1000)
			wantLimited(t, g.chat(flooder, freshKey), false)
			g.flood(flooder, 1000) // random keys do not use up the retries' checks
			if a := g.chat(flooder, freshKey); !served(a) {
				t.Fatalf("retry: %d %s", a.Status, a.Body)
			}
			if a := g.chat(flooder, freshKey); !served(a) {
				t.Fatalf("then: %d %s", a.Status, a.Body)
			}
		}},
		{"models without a key after the flood: served", func(t *testing.T, g *limitRig) {
			g.flood(flooder, 1000)
			a := g.send(flooder, "GET", "/v1/models", "")
			if a == nil || a.Status != 200 || !gjson.GetBytes(a.Body, "data.#(id==\"demo-chat\")").Exists() {
				t.Fatalf("models: %+v", a)
			}
			wantLimited(t, g.send(flooder, "GET", "/v1/models", g.badKey()), false)
		}},
		{"another address: unaffected", func(t *testing.T, g *limitRig) {
			g.flood(flooder, 1000)
			if a := g.chat(neighbour, g.badKey()); a == nil || a.Status != 401 {
				t.Fatalf("neighbour's bad key: %+v", a)
			}
		}},
		{"refill: one more 401 a second", func(t *testing.T, g *limitRig) {
			g.flood(flooder, 1000)
			g.now = g.now.Add(time.Second)
			if a := g.chat(flooder, g.badKey()); a == nil || a.Status != 401 {
				t.Fatalf("after a second: %+v", a)
			}
			wantLimited(t, g.chat(flooder, g.badKey()), false)
		}},
		{"revoked known key: counted as failed", func(t *testing.T, g *limitRig) {
			g.chat(flooder, secKey)
			g.flood(flooder, 1000)
			delete(g.f.Grants, string(replay.HashKey(secKey)))
			wantLimited(t, g.chat(flooder, secKey), false)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newLimitRig(t)) })
	}
}

// TestAuthFailureLimitConfigured: the burst and the rate come from Config.AuthFailures.
func TestAuthFailureLimitConfigured(t *testing.T) {
	g := newLimitRig(t)
	g.svc = replay.Service(t, g.f, func(c *lifecycle.Config) {
		c.Now = func() time.Time { return g.now }
		c.AuthFailures = lifecycle.AuthFailures{Burst: 3, Rate: 0.25}
	})
	if n := g.flood(flooder, 4); n != 3 {
		t.Fatalf("%d of 4 answered 401, want 3", n)
	}
	a := g.chat(flooder, g.badKey())
	if a == nil || a.Status != 429 || !slices.Contains(a.Headers, lifecycle.Header{Name: "retry-after", Value: "4"}) {
		t.Fatalf("%+v, want 429 with retry-after 4", a)
	}
}

// TestAuthFailureFloodCost: a sustained flood of random well-formed keys from one
// address costs accounting the burst plus one call per second, whatever the request
// rate: the rest are refused at the request headers.
func TestAuthFailureFloodCost(t *testing.T) {
	g := newLimitRig(t)
	const n, perSecond = 10_000, 370
	for i := range n {
		g.now = g.now.Add(time.Second / perSecond)
		if a := g.chat(flooder, g.badKey()); a == nil || a.Status != 401 && a.Status != 429 {
			t.Fatalf("request %d: %+v", i, a)
		}
	}
	seconds := n / perSecond
	if limit := lifecycle.DefaultAuthFailureBurst + seconds*lifecycle.DefaultAuthFailureRate + 1; g.f.Auths > limit {
		t.Errorf("%d accounting calls for %d requests over %d s, want at most %d", g.f.Auths, n, seconds, limit)
	}
	t.Logf("%d accounting calls for %d requests (%.4f per request)", g.f.Auths, n, float64(g.f.Auths)/n)
}
