package lifecycle

import (
	"math"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of the per-address bound on failed authentications (Config.AuthFailures).
const (
	DefaultAuthFailureBurst     = 20
	DefaultAuthFailureRate      = 1 // failures per second, refilled
	DefaultAuthFailureAddresses = 100_000
)

// AuthFailures bounds the requests refused invalid_api_key per client address: each
// such refusal takes a token from the address's bucket (Burst tokens, refilled at Rate
// per second); an address whose bucket is empty is answered 429 rate_limit_exceeded
// with Retry-After at its request headers, before its body is read or accounting is
// asked. Requests with a valid key never take tokens. Memory is bounded: at most
// Addresses buckets, all dropped when full (an attacker then starts from a full bucket
// again, which costs accounting Burst calls per address at most).
type AuthFailures struct {
	Burst     int
	Rate      float64
	Addresses int
}

// failLimiter holds the buckets of AuthFailures. Safe for concurrent use.
type failLimiter struct {
	cfg AuthFailures
	mu  sync.Mutex
	by  map[string]*rate.Limiter
}

func newFailLimiter(c AuthFailures) *failLimiter {
	if c.Burst <= 0 {
		c.Burst = DefaultAuthFailureBurst
	}
	if c.Rate <= 0 {
		c.Rate = DefaultAuthFailureRate
	}
	if c.Addresses <= 0 {
		c.Addresses = DefaultAuthFailureAddresses
	}
	return &failLimiter{cfg: c, by: map[string]*rate.Limiter{}}
}

// blocked returns how long addr must wait before its next attempt (0: it may try now).
func (l *failLimiter) blocked(addr string, now time.Time) time.Duration {
	l.mu.Lock()
	lim := l.by[addr]
	l.mu.Unlock()
	if lim == nil || lim.TokensAt(now) >= 1 {
		return 0
	}
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return d
}

// failed takes a token from addr's bucket.
func (l *failLimiter) failed(addr string, now time.Time) {
	l.mu.Lock()
	lim := l.by[addr]
	if lim == nil {
		if len(l.by) >= l.cfg.Addresses {
			clear(l.by)
		}
		lim = rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst)
		l.by[addr] = lim
	}
	l.mu.Unlock()
	lim.AllowN(now, 1)
}

// clientAddress is the client's address as Envoy reports it: x-envoy-external-address,
// which Envoy sets on an external request (use_remote_address) from the trusted client
// address and never takes from the client, else the last x-forwarded-for entry (the
// one Envoy appended).
func clientAddress(headers []Header) string {
	var xff string
	for _, h := range headers {
		switch h.Name {
		case "x-envoy-external-address":
			return strings.TrimSpace(h.Value)
		case "x-forwarded-for":
			xff = h.Value
		}
	}
	if i := strings.LastIndexByte(xff, ','); i >= 0 {
		xff = xff[i+1:]
	}
	return strings.TrimSpace(xff)
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
