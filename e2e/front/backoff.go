package front

import "time"

// jitteredBackoff is Envoy's JitteredExponentialBackOffStrategy
// (source/common/common/backoff_strategy.cc, nextBackOffMs), used by the router between
// retries and by an xDS stream between reconnections: each wait is uniform in
// [0, interval) milliseconds, the interval doubling from the base up to the maximum.
type jitteredBackoff struct {
	next, max time.Duration
}

func newJitteredBackoff(base, max time.Duration) jitteredBackoff {
	return jitteredBackoff{next: base, max: max}
}

// wait returns the next wait, drawn with random.
func (b *jitteredBackoff) wait(random uint64) time.Duration {
	cur := b.next
	if cur < b.max/2 {
		b.next = cur * 2
	} else {
		b.next = b.max
	}
	return time.Duration(random%uint64(cur/time.Millisecond)) * time.Millisecond
}
