package lifecycle

import (
	"sync"
	"testing"
)

// TestBackgroundWaitWhileWorkStarts: a wait may overlap new work (a sync.WaitGroup
// panics there); it ends once the count has been zero.
func TestBackgroundWaitWhileWorkStarts(t *testing.T) {
	var b background
	select {
	case <-b.idleC():
	default:
		t.Fatal("an empty count is not idle")
	}
	b.add()
	idle := b.idleC()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				b.add()
				b.done()
			}
		})
	}
	wg.Wait()
	select {
	case <-idle:
		t.Fatal("idle while work is counted")
	default:
	}
	b.done()
	<-idle
}
