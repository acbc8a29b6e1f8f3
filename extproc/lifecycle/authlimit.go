package lifecycle

import (
	"crypto/sha256"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/llmgw/gateway/extproc/apierr"
	"golang.org/x/time/rate"
)

// Defaults of the per-address bound on failed keys (Config.AuthFailures).
const (
	DefaultAuthFailureBurst     = 100
	DefaultAuthFailureRate      = 1 // failures per second, refilled
	DefaultAuthFailureAddresses = 100_000
)

// Bounds of the key memories of the limiter (see AuthFailures).
const (
	// knownKeyTTL is how long a key that authenticated is let through a limited
	// address without a retry: a working key is seldom idle longer.
	knownKeyTTL = 24 * time.Hour
	// knownKeyRefresh is how stale a known key's entry may get before a success renews
	// it: most requests of a known key then only read the table.
	knownKeyRefresh = time.Hour
	// retryTTL is how long a key refused unknown at a limited address is remembered for
	// its retry.
	retryTTL = 10 * time.Minute
	// maxKeyMemory bounds each key memory; it is cleared when full.
	maxKeyMemory = 100_000
)

// AuthFailures bounds the requests whose key failed (invalid_api_key: missing,
// malformed, ambiguous, unknown, disabled, expired or revoked), per client address.
//
// Each such failure takes a token from the address's bucket (Burst tokens, refilled at
// Rate per second) and is answered 401 invalid_api_key; a failure that finds the bucket
// empty is answered 429 rate_limit_exceeded with Retry-After (the time to the next
// token) instead. The bound applies only to failed keys:
//
//   - a request that needs no key (GET /v1/models without one) is always served;
//   - a key that authenticated on this replica within the last 24 hours is always
//     checked, and served when still valid, whatever its address's bucket;
//   - at an address whose bucket is empty, a missing or malformed key is answered 429
//     at the request headers, as is a well-formed key not known here: the flood then
//     costs accounting nothing, as a failure that finds the bucket empty is never
//     checked. A key refused that way is checked when it comes again (a client's
//     retry after Retry-After), at most one such check per address per 1/Rate seconds:
//     a valid one is served from then on. A flood of random keys never repeats one, so
//     it does not use up these checks.
//
// So accounting is asked about failing keys at most Burst times per address at once
// and then 2×Rate times a second. Memory is bounded: at most Addresses addresses and
// 100,000 keys in each of the two key memories, each cleared when full (an address
// then starts from a full bucket again).
type AuthFailures struct {
	Burst     int
	Rate      float64
	Addresses int
}

// addrState is one client address's buckets: failed keys, and checks of unknown keys
// while failures are refused.
type addrState struct {
	fails, checks *rate.Limiter
}

// failLimiter enforces AuthFailures. Safe for concurrent use.
type failLimiter struct {
	cfg AuthFailures
	mu  sync.RWMutex
	by  map[string]*addrState
	// known are keys that authenticated, retried keys refused unknown at a limited
	// address; both map a key hash to the end of its entry.
	known, retried map[[sha256.Size]byte]time.Time
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
	return &failLimiter{cfg: c, by: map[string]*addrState{},
		known: map[[sha256.Size]byte]time.Time{}, retried: map[[sha256.Size]byte]time.Time{}}
}

// keyAttempt is what the limiter needs of a request's key.
type keyAttempt struct {
	addr string
	// present: the request carries a key; wellFormed: one key of the gateway's shape.
	present, wellFormed bool
	hash                [sha256.Size]byte
}

// admit decides at the request headers whether a request may go on to have its key
// checked; when not, it returns how long the address must wait (see AuthFailures).
// needsKey is false for a request served without a key.
func (l *failLimiter) admit(k keyAttempt, needsKey bool, now time.Time) time.Duration {
	if k.addr == "" || !needsKey && !k.present {
		return 0
	}
	l.mu.RLock()
	clean := l.by[k.addr] == nil // the common case: an address that never failed
	l.mu.RUnlock()
	if clean {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.by[k.addr]
	if st == nil || st.fails.TokensAt(now) >= 1 {
		return 0
	}
	wait := waitFor(st.fails, now)
	if !k.wellFormed {
		return wait
	}
	if until, ok := l.known[k.hash]; ok && now.Before(until) {
		return 0
	}
	if until, ok := l.retried[k.hash]; ok && now.Before(until) && st.checks.AllowN(now, 1) {
		delete(l.retried, k.hash)
		return 0
	}
	remember(l.retried, k.hash, now.Add(retryTTL))
	return wait
}

// failed records that addr's key failed and returns the answer's code: invalid_api_key
// while the address has tokens, else rate_limit_exceeded with the wait.
func (l *failLimiter) failed(k keyAttempt, now time.Time) (apierr.Code, time.Duration) {
	if k.addr == "" {
		return apierr.InvalidAPIKey, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if k.wellFormed {
		delete(l.known, k.hash)
	}
	st := l.by[k.addr]
	if st == nil {
		if len(l.by) >= l.cfg.Addresses {
			clear(l.by)
		}
		st = &addrState{
			fails:  rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst),
			checks: rate.NewLimiter(rate.Limit(l.cfg.Rate), 1),
		}
		l.by[k.addr] = st
	}
	if st.fails.AllowN(now, 1) {
		return apierr.InvalidAPIKey, 0
	}
	return apierr.RateLimitExceeded, waitFor(st.fails, now)
}

// valid records that a key authenticated (renewing its entry at most once per
// knownKeyRefresh).
func (l *failLimiter) valid(hash [sha256.Size]byte, now time.Time) {
	l.mu.RLock()
	until, ok := l.known[hash]
	l.mu.RUnlock()
	if ok && until.Sub(now) > knownKeyTTL-knownKeyRefresh {
		return
	}
	l.mu.Lock()
	remember(l.known, hash, now.Add(knownKeyTTL))
	l.mu.Unlock()
}

// remember sets m[k], clearing m first when it is full.
func remember(m map[[sha256.Size]byte]time.Time, k [sha256.Size]byte, until time.Time) {
	if _, ok := m[k]; !ok && len(m) >= maxKeyMemory {
		clear(m)
	}
	m[k] = until
}

// waitFor is how long until lim has a token.
func waitFor(lim *rate.Limiter, now time.Time) time.Duration {
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return d
}

// tooManyFailures is the answer to a request refused by AuthFailures. A valid key not
// yet checked on this replica gets it too (its check waits for its retry), so it speaks
// of the address's failed keys, never of this request's key as invalid.
func tooManyFailures(wait time.Duration) *apierr.Error {
	e := apierr.New(apierr.RateLimitExceeded, "This address sent too many failed API keys; retry after the Retry-After delay (a valid key is then checked).")
	e.RetryAfter = retryAfterSeconds(wait)
	return e
}

// clientAddress is the client's address as Envoy reports it: x-envoy-external-address,
// which Envoy sets on an external request (use_remote_address) from the trusted client
// address and never takes from the client, else the last x-forwarded-for entry (the
// one Envoy appended).
//
// The trusted client address is the connection's peer, or, with xff_num_trusted_hops
// N > 0, the Nth address from the end of the x-forwarded-for the request arrived with,
// appended by the trusted proxies in front of Envoy (source/common/http/
// conn_manager_utility.cc, ConnectionManagerUtility::mutateRequestHeaders, which reads
// it with Utility::getLastAddressFromXFF(headers, N-1) before appending the peer, and
// sets x-envoy-external-address from it on an edge request). Behind a load balancer
// that appends the client's address, each client is therefore limited on its own.
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
