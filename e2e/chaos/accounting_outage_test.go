package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/llmgw/gateway/e2e/stack"
)

// TestAccountingOutage45s: accounting is killed (kill -9) and comes back 45 s later, three
// leases of this suite (15 s) on.
func TestAccountingOutage45s(t *testing.T) {
	t.Parallel()
	accountingOutage(t, 45*time.Second, func(s *stack.Stack, d time.Duration) error {
		if err := s.Kill("accounting"); err != nil {
			return err
		}
		time.Sleep(d)
		return s.Restart(context.Background(), "accounting")
	})
}

// TestAccountingOutage3m: accounting is paused (SIGSTOP) for 3 minutes: its connections
// stay open and nothing answers, and its own clock runs on. It takes four minutes of
// wall time, so it runs with `make chaos` (CHAOS_LONG=1), not in `make test`'s short
// form of the fault-injection suite.
func TestAccountingOutage3m(t *testing.T) {
	if os.Getenv("CHAOS_LONG") != "1" {
		t.Skip("the 3-minute outage runs with make chaos (CHAOS_LONG=1)")
	}
	t.Parallel()
	accountingOutage(t, 3*time.Minute, func(s *stack.Stack, d time.Duration) error {
		if err := s.Pause("accounting"); err != nil {
			return err
		}
		time.Sleep(d)
		return s.Resume("accounting")
	})
}

// accountingOutage takes accounting away for d (outage does it and brings it back) while
// answers are delivered: streams that end during the outage (their settlement waits for
// accounting) and streams that run across it (their holds' leases run out while
// accounting is away). Every one of them completes, and afterwards each is charged
// exactly once; a request sent during the outage is refused with the spec's 503
// service_unavailable and costs nothing.
func accountingOutage(t *testing.T, d time.Duration, outage func(*stack.Stack, time.Duration) error) {
	s := ownStack(t)
	k := newKeyOn(t, s, true)
	c := sdkClient(s, k.secret)
	secs := int(d / time.Second)

	var (
		answers []*answer
		wg      sync.WaitGroup
		started []chan struct{}
	)
	for i := range 8 {
		// Half end halfway through the outage, half a few seconds after it (their
		// leases ran out while accounting was away).
		slow := secs/2 + 2
		if i%2 == 1 {
			slow = secs + 5
		}
		a := &answer{words: int(k.next.Add(1))}
		first := make(chan struct{})
		answers, started = append(answers, a), append(started, first)
		wg.Go(func() { chat(c, "demo-chat", a, fmt.Sprintf("[[mock:tokens=8]] [[mock:slow=%d]]", slow), true, first) })
	}
	for i, first := range started {
		select {
		case <-first:
		case <-time.After(30 * time.Second):
			t.Fatalf("stream %d did not start", i)
		}
	}

	begin := time.Now()
	refused := make(chan error, 1)
	go func() {
		// Halfway through the outage: a new request cannot be admitted.
		time.Sleep(d / 2)
		a := &answer{words: int(k.next.Add(1))}
		chat(c, "demo-chat", a, "[[mock:tokens=2]]", false, nil)
		answers = append(answers, a) // read after wg.Wait and <-refused
		refused <- a.err
	}()
	if err := outage(s, d); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("accounting away %v", back.Sub(begin).Round(time.Millisecond))
	wg.Wait()
	// The spec's service_unavailable: 503, api_error, not retryable as such.
	var apiErr *openai.Error
	if err := <-refused; !errors.As(err, &apiErr) {
		t.Errorf("request during the outage: %v, want 503 service_unavailable", err)
	} else if apiErr.StatusCode != 503 || apiErr.Code != "service_unavailable" || apiErr.Type != "api_error" ||
		apiErr.Response.Header.Get("x-should-retry") != "false" {
		t.Errorf("request during the outage: %d %s (x-should-retry %q), want 503 service_unavailable",
			apiErr.StatusCode, apiErr.RawJSON(), apiErr.Response.Header.Get("x-should-retry"))
	}
	for _, a := range answers[:len(started)] {
		if a.err != nil {
			t.Errorf("answer %d (%s..%s) broke: %v", a.words, a.start.Format(time.StampMilli), a.end.Format(time.StampMilli), a.err)
		}
	}
	waitSettled(t, s, k, leaseBound)
	t.Logf("every hold settled %v after accounting was back", time.Since(back).Round(time.Millisecond))
	if n := judgeAnswers(t, s, k, answers); n != len(started) {
		t.Errorf("%d answers complete and charged, want %d", n, len(started))
	}
}
