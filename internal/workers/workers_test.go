package workers

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// Every function runs exactly once, whether a kept goroutine or one of its own runs it,
// and no more goroutines are kept than Max.
func TestPoolRunsEveryFunctionOnce(t *testing.T) {
	for _, max := range []int{0, 1, 4, 64} {
		p := New(max)
		const n = 2000
		var wg sync.WaitGroup
		var mu sync.Mutex
		ran := make(map[int]int)
		for i := range n {
			wg.Add(1)
			p.Go(func() {
				defer wg.Done()
				mu.Lock()
				ran[i]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if len(ran) != n {
			t.Fatalf("max %d: %d of %d functions ran", max, len(ran), n)
		}
		for i, c := range ran {
			if c != 1 {
				t.Fatalf("max %d: function %d ran %d times", max, i, c)
			}
		}
		if k := p.kept.Load(); k > int32(max) || k < 0 {
			t.Fatalf("max %d: %d goroutines kept", max, k)
		}
	}
}

// A kept goroutine that is busy never delays a function: with the only kept goroutine
// blocked, the next function still runs (on a goroutine of its own).
func TestPoolNeverWaitsForAWorker(t *testing.T) {
	p := New(1)
	block := make(chan struct{})
	defer close(block)
	p.Go(func() { <-block })
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
}

// A kept goroutine that finished waits for the next function: after its first function
// has run, it takes one handed to it directly (what Go tries first), again and again,
// and no second goroutine is kept.
func TestPoolReusesIdleWorkers(t *testing.T) {
	p := New(1)
	first := make(chan struct{})
	p.Go(func() { close(first) })
	<-first
	for i := range 100 {
		done := make(chan struct{})
		handed := false
		for deadline := time.Now().Add(10 * time.Second); !handed; {
			select {
			case p.ready <- func() { close(done) }:
				handed = true
			default:
				if time.Now().After(deadline) {
					t.Fatalf("function %d: the kept goroutine never came back for work", i)
				}
				runtime.Gosched()
			}
		}
		<-done
	}
	if k := p.kept.Load(); k != 1 {
		t.Fatalf("%d goroutines kept, want 1", k)
	}
}
