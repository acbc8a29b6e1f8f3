// Package health is the per-replica health of upstream channels: a channel that failed
// is skipped by later requests for a while, and a single probe request decides when it
// comes back.
//
// It is soft state, never money: each extproc replica keeps its own view (replicas do
// not share it; a channel that failed on one replica is tried once more by each other
// replica before they skip it too), it is lost on restart, and nothing is charged or
// released because of it.
//
// Cooldowns grow with consecutive failures: a failure of the provider account (out of
// funds, unauthorized), or a credential the gateway could not obtain, cools a channel for
// AccountCooldown, doubling up to MaxAccountCooldown, since such an account rarely
// recovers within seconds; a transport
// failure (connection refused or reset, timeout), a 5xx or a 429 backs off exponentially
// from BaseBackoff up to MaxBackoff. When the cooldown is over, the next request that asks
// becomes the channel's only probe: other requests keep skipping the channel until the
// probe reports (or ProbeTimeout passes without a report); a probe that succeeds makes the
// channel healthy, one that fails cools it for the next, longer, period.
//
// The failures reported during one cooldown count once: they are the requests that were
// already on their way to the channel when it failed (under load, many at once), and
// they say nothing the first did not. Were each to double the cooldown, a few seconds of
// outage would cool a busy channel for MaxBackoff; instead a cooldown grows only with
// the failures that follow it — a failed probe, or a request sent after it ended.
//
// The package knows nothing of the catalog, the lifecycle or Envoy: channels are names.
package health

import (
	"sync"
	"time"
)

// Failure is why an attempt on a channel failed.
type Failure uint8

const (
	// Transport: the connection was refused, reset or timed out, or no host was
	// available.
	Transport Failure = iota + 1
	// ServerError: a 5xx or an overloaded answer.
	ServerError
	// RateLimited: a 429 that is not an account problem.
	RateLimited
	// Account: the provider account cannot serve (out of funds, unauthorized,
	// forbidden).
	Account
	// Credential: the gateway could not obtain the channel's credential (a token
	// endpoint that refused or did not answer); nothing was sent upstream. It cools like
	// Account, since a refused grant rarely recovers within seconds.
	Credential
)

func (f Failure) String() string {
	switch f {
	case 0:
		return "ok"
	case Transport:
		return "transport"
	case ServerError:
		return "server_error"
	case RateLimited:
		return "rate_limited"
	case Account:
		return "account"
	case Credential:
		return "credential"
	}
	return "unknown"
}

// State is a channel's state, for metrics.
type State uint8

const (
	Healthy State = iota
	// Cooling: skipped until its cooldown ends.
	Cooling
	// Probing: one request is trying it; others skip it.
	Probing
)

func (s State) String() string {
	switch s {
	case Cooling:
		return "cooling"
	case Probing:
		return "probing"
	}
	return "healthy"
}

// Config sets the cooldowns; zero fields take the defaults.
type Config struct {
	BaseBackoff        time.Duration // 1 s
	MaxBackoff         time.Duration // 60 s
	AccountCooldown    time.Duration // 60 s
	MaxAccountCooldown time.Duration // 15 min
	ProbeTimeout       time.Duration // 60 s: a probe that never reports frees the slot
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Observe, when set, is told every reported attempt: its channel and failure (0 for
	// a usable answer). It must not call the Tracker.
	Observe func(channel string, f Failure)
}

func (c *Config) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.BaseBackoff, time.Second)
	set(&c.MaxBackoff, time.Minute)
	set(&c.AccountCooldown, time.Minute)
	set(&c.MaxAccountCooldown, 15*time.Minute)
	set(&c.ProbeTimeout, time.Minute)
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Tracker holds the channels' health. Safe for concurrent use.
type Tracker struct {
	cfg Config
	mu  sync.Mutex
	chs map[string]*channel
}

type channel struct {
	failures int       // consecutive cooldowns
	since    time.Time // start of the cooldown
	until    time.Time // end of the cooldown
	probe    time.Time // when the current probe started; zero when none
	last     Failure
}

// New returns a Tracker.
func New(cfg Config) *Tracker {
	cfg.defaults()
	return &Tracker{cfg: cfg, chs: map[string]*channel{}}
}

// Acquire reports whether a request may use the channel now: a healthy channel always;
// a cooling one never; one whose cooldown is over only as its single probe (probe true:
// the caller must report the outcome with Succeeded or Failed).
func (t *Tracker) Acquire(name string) (ok, probe bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.chs[name]
	if c == nil {
		return true, false
	}
	now := t.cfg.Now()
	if !t.probeable(c, now) {
		return false, false
	}
	c.probe = now
	return true, true
}

// probeable reports whether a failed channel may take its probe at now: its cooldown is
// over and no probe is in flight (or the last one timed out). t.mu is held.
func (t *Tracker) probeable(c *channel, now time.Time) bool {
	return !now.Before(c.until) && (c.probe.IsZero() || now.Sub(c.probe) >= t.cfg.ProbeTimeout)
}

// Usable reports, without taking anything, whether Acquire would let a request use the
// channel now.
func (t *Tracker) Usable(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.chs[name]
	return c == nil || t.probeable(c, t.cfg.Now())
}

// Succeeded records a usable answer from the channel: it is healthy again.
func (t *Tracker) Succeeded(name string) {
	t.mu.Lock()
	delete(t.chs, name)
	t.mu.Unlock()
	if t.cfg.Observe != nil {
		t.cfg.Observe(name, 0)
	}
}

// Failed records a failed attempt and returns how long the channel now cools. A failure
// during the channel's cooldown starts no new one: it only lengthens the cooldown to
// what its own kind asks for at the same step (an account failure during a transport
// cooldown), never past that.
func (t *Tracker) Failed(name string, f Failure) time.Duration {
	if t.cfg.Observe != nil {
		defer t.cfg.Observe(name, f)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	c := t.chs[name]
	if c == nil {
		c = &channel{}
		t.chs[name] = c
	}
	if now.Before(c.until) {
		if end := c.since.Add(Cooldown(t.cfg, f, c.failures)); end.After(c.until) {
			c.until, c.last = end, f
		}
		return c.until.Sub(now)
	}
	c.failures++
	c.last = f
	c.probe = time.Time{}
	d := Cooldown(t.cfg, f, c.failures)
	c.since, c.until = now, now.Add(d)
	return d
}

// State returns the channel's state and its last failure (0 when healthy).
func (t *Tracker) State(name string) (State, Failure) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.chs[name]
	switch {
	case c == nil:
		return Healthy, 0
	case !c.probe.IsZero() && t.cfg.Now().Sub(c.probe) < t.cfg.ProbeTimeout:
		return Probing, c.last
	}
	return Cooling, c.last
}

// Cooldown is the rule: how long a channel cools for its n-th consecutive cooldown
// (n ≥ 1), started by a failure of kind f. Account and credential failures start at
// AccountCooldown and double up to MaxAccountCooldown; the others start at BaseBackoff and double up to MaxBackoff.
func Cooldown(cfg Config, f Failure, n int) time.Duration {
	cfg.defaults()
	base, limit := cfg.BaseBackoff, cfg.MaxBackoff
	if f == Account || f == Credential {
		base, limit = cfg.AccountCooldown, cfg.MaxAccountCooldown
	}
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
