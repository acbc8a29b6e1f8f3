package lifecycle

import "sync"

// background counts the work that outlives a stream (settlements, abandoned holds).
// Unlike a sync.WaitGroup it may be waited on while new work starts: a wait ends when
// the count has been zero once since it began (the replay harness waits for one
// request's settlement while other requests run; a WaitGroup panics when its count
// rises from zero during a Wait).
type background struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n is zero
}

var closedIdle = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (b *background) add() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 {
		b.idle = make(chan struct{})
	}
	b.n++
}

func (b *background) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n--
	if b.n == 0 {
		close(b.idle)
	}
}

// idleC is closed once the count is zero.
func (b *background) idleC() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 {
		return closedIdle
	}
	return b.idle
}
