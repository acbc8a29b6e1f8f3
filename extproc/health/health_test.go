package health

import (
	"testing"
	"time"
)

func TestCooldown(t *testing.T) {
	cfg := Config{}
	for _, tc := range []struct {
		f    Failure
		n    int
		want time.Duration
	}{
		{Transport, 1, time.Second},
		{Transport, 2, 2 * time.Second},
		{ServerError, 4, 8 * time.Second},
		{RateLimited, 6, 32 * time.Second},
		{Transport, 7, time.Minute}, // 64 s capped
		{Transport, 100, time.Minute},
		{Account, 1, time.Minute},
		{Account, 2, 2 * time.Minute},
		{Account, 4, 8 * time.Minute},
		{Account, 5, 15 * time.Minute}, // 16 min capped
		{Account, 50, 15 * time.Minute},
		{Credential, 1, time.Minute},
		{Credential, 5, 15 * time.Minute},
	} {
		if got := Cooldown(cfg, tc.f, tc.n); got != tc.want {
			t.Errorf("Cooldown(%v, %d) = %v, want %v", tc.f, tc.n, got, tc.want)
		}
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) add(d time.Duration)     { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func acquire(tr *Tracker, n string) bool { ok, _ := tr.Acquire(n); return ok }

func TestSkippedWhileCoolingThenOneProbe(t *testing.T) {
	c := newClock()
	tr := New(Config{Now: c.now})
	if ok, probe := tr.Acquire("a"); !ok || probe {
		t.Fatalf("a new channel: ok %v probe %v, want usable without probing", ok, probe)
	}
	if d := tr.Failed("a", Account); d != time.Minute {
		t.Fatalf("first account failure cools %v", d)
	}
	if acquire(tr, "a") {
		t.Fatal("cooling channel acquired")
	}
	if s, f := tr.State("a"); s != Cooling || f != Account {
		t.Errorf("state %v %v", s, f)
	}
	if !acquire(tr, "b") {
		t.Error("another channel is affected")
	}
	c.add(time.Minute)
	ok, probe := tr.Acquire("a")
	if !ok || !probe {
		t.Fatalf("after the cooldown: ok %v probe %v, want the single probe", ok, probe)
	}
	if acquire(tr, "a") {
		t.Fatal("a second request acquired the channel while its probe runs")
	}
	if s, _ := tr.State("a"); s != Probing {
		t.Errorf("state %v, want probing", s)
	}
	// The probe fails: the next cooldown is longer.
	if d := tr.Failed("a", Account); d != 2*time.Minute {
		t.Errorf("second failure cools %v", d)
	}
	c.add(2 * time.Minute)
	if ok, probe := tr.Acquire("a"); !ok || !probe {
		t.Fatal("no probe after the second cooldown")
	}
	tr.Succeeded("a")
	if ok, probe := tr.Acquire("a"); !ok || probe {
		t.Errorf("after a successful probe: ok %v probe %v, want healthy", ok, probe)
	}
	// Back to the first step of the backoff.
	if d := tr.Failed("a", Transport); d != time.Second {
		t.Errorf("failure after recovery cools %v, want the base backoff", d)
	}
}

func TestAProbeThatNeverReportsFreesItsSlot(t *testing.T) {
	c := newClock()
	tr := New(Config{Now: c.now, ProbeTimeout: 30 * time.Second})
	tr.Failed("a", Transport)
	c.add(time.Second)
	if ok, probe := tr.Acquire("a"); !ok || !probe {
		t.Fatal("no probe")
	}
	c.add(29 * time.Second)
	if acquire(tr, "a") {
		t.Fatal("a second probe before the probe timeout")
	}
	c.add(time.Second)
	if ok, probe := tr.Acquire("a"); !ok || !probe {
		t.Error("the slot of a silent probe is not freed after the timeout")
	}
}

// TestFailuresDuringACooldownCountOnce: the requests in flight when a channel fails
// report their failures together; they start one cooldown, not one each, so a short
// outage under load leaves the channel cooling for the base backoff, not MaxBackoff.
func TestFailuresDuringACooldownCountOnce(t *testing.T) {
	c := newClock()
	tr := New(Config{Now: c.now})
	for i := range 9 {
		if d := tr.Failed("a", Transport); d != time.Second-time.Duration(i)*10*time.Millisecond {
			t.Fatalf("failure %d of the burst: cools %v", i+1, d)
		}
		c.add(10 * time.Millisecond)
	}
	c.add(910 * time.Millisecond)
	if ok, probe := tr.Acquire("a"); !ok || !probe {
		t.Fatal("no probe one base backoff after the burst")
	}
	// The probe fails, with another straggler: the next cooldown is the second step.
	if d := tr.Failed("a", Transport); d != 2*time.Second {
		t.Fatalf("failed probe cools %v, want 2s", d)
	}
	tr.Failed("a", ServerError)
	c.add(2 * time.Second)
	if ok, probe := tr.Acquire("a"); !ok || !probe {
		t.Fatal("no probe after the second cooldown")
	}
	tr.Succeeded("a")
	if !acquire(tr, "a") {
		t.Error("not healthy after the probe succeeded")
	}
}

// TestOutageUnderLoadRecoversWithinSeconds: a channel under steady load (a request
// every 10 ms, every one that may go failing) that is down for 5 s is used again within
// a few seconds of its recovery.
func TestOutageUnderLoadRecoversWithinSeconds(t *testing.T) {
	c := newClock()
	tr := New(Config{Now: c.now})
	start := c.t
	up := start.Add(5 * time.Second)
	var back time.Time
	for c.t.Before(start.Add(time.Minute)) {
		if ok, _ := tr.Acquire("a"); ok {
			if c.t.Before(up) {
				// Nine requests were in flight with this one.
				for range 9 {
					tr.Failed("a", Transport)
				}
			} else {
				tr.Succeeded("a")
				back = c.t
				break
			}
		}
		c.add(10 * time.Millisecond)
	}
	if back.IsZero() || back.Sub(up) > 4*time.Second {
		t.Fatalf("recovered at %v after the upstream did, want within 4s", back.Sub(up))
	}
}

// TestAnAccountFailureDuringACooldownTakesOver: an account refusal during a transport
// cooldown cools the channel for the account's cooldown, from the cooldown's start.
func TestAnAccountFailureDuringACooldownTakesOver(t *testing.T) {
	c := newClock()
	tr := New(Config{Now: c.now})
	tr.Failed("a", Transport)
	c.add(500 * time.Millisecond)
	if d := tr.Failed("a", Account); d != time.Minute-500*time.Millisecond {
		t.Errorf("account failure during a transport cooldown cools %v", d)
	}
	if _, f := tr.State("a"); f != Account {
		t.Errorf("last failure %v, want account", f)
	}
	if d := tr.Failed("a", Transport); d != time.Minute-500*time.Millisecond {
		t.Errorf("a transport failure shortened the account cooldown to %v", d)
	}
}
