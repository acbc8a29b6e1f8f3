package chaos_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recoveryBound is how soon after the upstream is back demo-failover must answer again.
const recoveryBound = 10 * time.Second

// TestUpstreamOutageUnderLoad: the mock provider is down for 5 s while nine clients keep
// demo-failover busy. The requests in flight when it fails report their failures
// together; they count once, so the working channel's cooldown stays at the first steps
// of its back-off and the channel serves again within recoveryBound of the mock's
// return (it cooled for 60 s, the most, when each failure doubled the cooldown). Every
// complete answer is charged once; an error costs nothing.
func TestUpstreamOutageUnderLoad(t *testing.T) {
	t.Parallel()
	s := ownStack(t)
	k := newKeyOn(t, s, false)
	c := sdkClient(s, k.secret)

	// The first request finds the exhausted accounts and the unreachable port, and
	// cools them: the load below goes to the working channel.
	warm := &answer{words: int(k.next.Add(1))}
	chat(c, "demo-failover", warm, "[[mock:tokens=2]]", false, nil)
	if warm.err != nil {
		t.Fatalf("demo-failover before the outage: %v", warm.err)
	}

	var (
		mu      sync.Mutex
		answers = []*answer{warm}
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	for range 9 {
		wg.Go(func() {
			for !stop.Load() {
				a := &answer{words: int(k.next.Add(1))}
				chat(c, "demo-failover", a, "[[mock:tokens=2]]", false, nil)
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
				if a.err != nil {
					time.Sleep(20 * time.Millisecond) // as a client backs off
				}
			}
		})
	}
	time.Sleep(2 * time.Second)
	if err := s.Kill("mock"); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	time.Sleep(5 * time.Second)
	if err := s.Restart(context.Background(), "mock"); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	t.Logf("mock down %v", up.Sub(down).Round(time.Millisecond))

	// Recovered: the first answer of a request sent after the mock was back.
	var recovered time.Time
	for deadline := up.Add(3 * recoveryBound); recovered.IsZero() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		for _, a := range answers {
			if a.err == nil && a.start.After(up) && (recovered.IsZero() || a.end.Before(recovered)) {
				recovered = a.end
			}
		}
		mu.Unlock()
	}
	time.Sleep(time.Second) // some steady traffic after the recovery
	stop.Store(true)
	wg.Wait()

	var failedInOutage int
	for _, a := range answers {
		if a.err != nil && a.start.After(down) && a.start.Before(up) {
			failedInOutage++
		}
	}
	if failedInOutage == 0 {
		t.Error("no request failed while the mock was down: the test proves nothing")
	}
	if recovered.IsZero() {
		t.Fatalf("demo-failover did not answer within %v of the mock's return", 3*recoveryBound)
	}
	t.Logf("demo-failover served again %v after the mock was back (bound %v); %d requests, %d failed during the outage",
		recovered.Sub(up).Round(time.Millisecond), recoveryBound, len(answers), failedInOutage)
	if d := recovered.Sub(up); d > recoveryBound {
		t.Errorf("demo-failover served again %v after the mock was back, want within %v", d, recoveryBound)
	}
	waitSettled(t, s, k, leaseBound)
	judgeAnswers(t, s, k, answers)
}
