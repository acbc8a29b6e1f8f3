// Package faillimit bounds failed attempts (of a credential, a sign-in) per client
// address with token buckets, in bounded memory. It depends on nothing of ours.
package faillimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter gives each address a bucket of Burst tokens refilled at Rate per second; a
// failure takes a token, and an address with an empty bucket is blocked until one
// refills. Successes take nothing. At most Addresses buckets are kept: when full, all
// are dropped (an attacker then starts again from a full bucket, Burst more tries per
// address at most). Safe for concurrent use.
type Limiter struct {
	burst     int
	rate      rate.Limit
	addresses int

	mu sync.Mutex
	by map[string]*rate.Limiter
}

// New returns a Limiter; burst, perSecond and addresses must be positive.
func New(burst int, perSecond float64, addresses int) *Limiter {
	return &Limiter{burst: burst, rate: rate.Limit(perSecond), addresses: addresses, by: map[string]*rate.Limiter{}}
}

// Blocked returns how long addr must wait before its next attempt (0: it may try now).
func (l *Limiter) Blocked(addr string, now time.Time) time.Duration {
	l.mu.Lock()
	b := l.by[addr]
	l.mu.Unlock()
	if b == nil || b.TokensAt(now) >= 1 {
		return 0
	}
	r := b.ReserveN(now, 1)
	defer r.CancelAt(now)
	return r.DelayFrom(now)
}

// Failed takes a token from addr's bucket.
func (l *Limiter) Failed(addr string, now time.Time) {
	l.mu.Lock()
	b := l.by[addr]
	if b == nil {
		if len(l.by) >= l.addresses {
			clear(l.by)
		}
		b = rate.NewLimiter(l.rate, l.burst)
		l.by[addr] = b
	}
	l.mu.Unlock()
	b.AllowN(now, 1)
}
