package faillimit

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := New(3, 0.5, 2)
	for i := range 3 {
		if d := l.Blocked("a", t0); d != 0 {
			t.Fatalf("attempt %d blocked for %s", i, d)
		}
		l.Failed("a", t0)
	}
	if d := l.Blocked("a", t0); d != 2*time.Second {
		t.Fatalf("after the burst: blocked %s, want 2s", d)
	}
	if d := l.Blocked("b", t0); d != 0 {
		t.Fatalf("another address blocked %s", d)
	}
	if d := l.Blocked("a", t0.Add(2*time.Second)); d != 0 {
		t.Fatalf("a token refilled, still blocked %s", d)
	}
	// Full: a third address drops every bucket.
	l.Failed("b", t0)
	l.Failed("c", t0)
	if d := l.Blocked("a", t0); d != 0 {
		t.Fatalf("bucket kept past the address bound: %s", d)
	}
}
