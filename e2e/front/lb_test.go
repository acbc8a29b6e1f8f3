package front

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func hosts(spec ...[2]int) []*Host {
	var out []*Host
	for i, s := range spec {
		out = append(out, &Host{Addr: string(rune('a' + i)), Priority: s[0], Healthy: s[1] == 1, Weight: 1})
	}
	return out
}

func fixedRandom(v uint64) func() uint64 { return func() uint64 { return v } }

// TestPriorityLoad pins Envoy's per-priority load: an unhealthy priority spills to the
// next; a half-healthy one keeps 70% (overprovisioning 1.4); with nothing healthy the
// cluster is in total panic and the load follows the host counts.
func TestPriorityLoad(t *testing.T) {
	for name, c := range map[string]struct {
		hosts     []*Host
		load      []uint32
		wantPanic []bool
	}{
		"all healthy":         {hosts([2]int{0, 1}, [2]int{1, 1}, [2]int{2, 1}), []uint32{100, 0, 0}, []bool{false, false, false}},
		"p0 unhealthy":        {hosts([2]int{0, 0}, [2]int{1, 1}, [2]int{2, 1}), []uint32{0, 100, 0}, []bool{false, false, false}},
		"p0 half healthy":     {hosts([2]int{0, 1}, [2]int{0, 0}, [2]int{1, 1}), []uint32{70, 30}, []bool{false, false}},
		"p0 and p1 unhealthy": {hosts([2]int{0, 0}, [2]int{1, 0}, [2]int{2, 1}), []uint32{0, 0, 100}, []bool{false, false, false}},
		"none healthy":        {hosts([2]int{0, 0}, [2]int{1, 0}, [2]int{1, 0}), []uint32{34, 66}, []bool{true, true}},
	} {
		b := newBalancer(c.hosts, fixedRandom(7))
		if !slices.Equal(b.load, c.load) || !slices.Equal(b.panic, c.wantPanic) {
			t.Errorf("%s: load %v panic %v, want %v %v", name, b.load, b.panic, c.load, c.wantPanic)
		}
	}
}

// TestTotalPanicUsesUnhealthyHosts: in panic the priority's hosts are used, healthy or
// not (hostSourceToUse's AllHosts).
func TestTotalPanicUsesUnhealthyHosts(t *testing.T) {
	b := newBalancer(hosts([2]int{0, 0}), fixedRandom(0))
	if h := b.choose(nil); h == nil || h.Addr != "a" {
		t.Fatalf("chose %v, want the unhealthy host a", h)
	}
	if h := newBalancer(nil, nil).choose(nil); h != nil {
		t.Errorf("a cluster without hosts chose %v", h)
	}
}

// TestPreviousPrioritiesSequence: with update_frequency 1, each retry excludes the
// priorities attempted; once all were, the original load is used from then on.
func TestPreviousPrioritiesSequence(t *testing.T) {
	b := newBalancer(hosts([2]int{0, 1}, [2]int{1, 1}, [2]int{2, 1}), fixedRandom(42))
	rs := &retryState{on: retryOnReset, remaining: 10, selection: 1, prio: &previousPriorities{frequency: 1}, random: fixedRandom(0), back: newJitteredBackoff(retryBaseInterval, retryMaxInterval)}
	var got []int
	h := b.choose(nil)
	for range 5 {
		got = append(got, h.Priority)
		rs.onHostAttempted(h)
		rs.isRetry = true
		h = b.choose(rs)
	}
	if !slices.Equal(got, []int{0, 1, 2, 0, 0}) {
		t.Errorf("priorities attempted %v, want 0,1,2 then the original load (0)", got)
	}
}

// TestRetryBackoff pins the jittered exponential back-off: uniform below 25, 50, 100,
// 200, then 250 ms.
func TestRetryBackoff(t *testing.T) {
	rs := &retryState{random: fixedRandom(1<<40 - 1), back: newJitteredBackoff(retryBaseInterval, retryMaxInterval)}
	var got []time.Duration
	for range 6 {
		got = append(got, rs.backoff())
	}
	limits := []time.Duration{25, 50, 100, 200, 250, 250}
	for i, d := range got {
		want := time.Duration((1<<40-1)%uint64(limits[i])) * time.Millisecond
		if d != want {
			t.Errorf("back-off %d = %v, want %v (below %d ms)", i, d, want, limits[i])
		}
	}
}

// TestMaxRetriesHeaderParsing: the header counts only when something can retry, and is
// consumed either way, as the other retry headers.
func TestMaxRetriesHeaderParsing(t *testing.T) {
	h := headerList{{"x-envoy-max-retries", "3"}, {"x-envoy-retriable-status-codes", "429"}}
	if rs, refused := newRetryState(nil, &h, fixedRandom(0)); rs != nil || refused != "" || len(h) != 0 {
		t.Errorf("no retry_on: state %v refused %q headers %v", rs, refused, h)
	}
	h = headerList{{"x-envoy-max-retries", "3"}}
	rs, _ := newRetryState(&RetryPolicy{On: retryOnReset, NumRetries: 1, HostSelectionAttempts: 1}, &h, fixedRandom(0))
	if rs == nil || rs.remaining != 3 {
		t.Errorf("state %+v, want 3 retries", rs)
	}
	h = headerList{{"x-envoy-max-retries", "many"}}
	if rs, _ := newRetryState(&RetryPolicy{On: retryOnReset, NumRetries: 2}, &h, fixedRandom(0)); rs.remaining != 2 {
		t.Errorf("a non-number header changed the count to %d", rs.remaining)
	}
}

// TestReplayBodyOverLimit: a body over the buffer limit still goes whole to the first
// attempt, but no retry can replay it.
func TestReplayBodyOverLimit(t *testing.T) {
	rb := newReplayBody(strings.NewReader("0123456789"), 4)
	b, err := io.ReadAll(rb.reader())
	if string(b) != "0123456789" || err != nil || !rb.overflowed() {
		t.Errorf("first attempt read %q %v, overflowed %v", b, err, rb.overflowed())
	}
	rb = newReplayBody(strings.NewReader("0123"), 4)
	first := rb.reader()
	_, _ = first.Read(make([]byte, 2))
	b, _ = io.ReadAll(rb.reader())
	if string(b) != "0123" || rb.overflowed() {
		t.Errorf("a retry read %q, want the whole body", b)
	}
	if _, err := first.Read(make([]byte, 2)); err == nil {
		t.Error("an abandoned attempt's body still reads")
	}
}

// TestReplayBodyHeldWhole: a body the front holds whole within the limit goes whole to
// every attempt, each reading its own copy; over the limit it is replayed as a stream.
func TestReplayBodyHeldWhole(t *testing.T) {
	rb := newReplayBody(bytes.NewReader([]byte("0123")), 4)
	first := rb.reader()
	_, _ = first.Read(make([]byte, 2))
	for i := range 2 {
		if b, err := io.ReadAll(rb.reader()); string(b) != "0123" || err != nil || rb.overflowed() {
			t.Errorf("attempt %d read %q %v, overflowed %v", i+2, b, err, rb.overflowed())
		}
	}
	rb = newReplayBody(bytes.NewReader([]byte("0123456789")), 4)
	if b, _ := io.ReadAll(rb.reader()); string(b) != "0123456789" || !rb.overflowed() {
		t.Errorf("over the limit: read %q, overflowed %v", b, rb.overflowed())
	}
}
