package servertest

import (
	"context"

	"github.com/llmgw/gateway/accounting/ledger"
)

// The fake's change feed: it carries only what a test sends with Emit (the fake has
// no derived tables whose changes it could report).

type feed struct {
	in   chan ledger.Change
	done chan struct{}
}

// Emit delivers c to every open Changes feed, blocking until each took it.
func (m *Memory) Emit(c ledger.Change) {
	m.mu.Lock()
	feeds := append([]*feed(nil), m.feeds...)
	m.mu.Unlock()
	for _, f := range feeds {
		select {
		case f.in <- c:
		case <-f.done:
		}
	}
}

// Feeds returns how many Changes feeds are open.
func (m *Memory) Feeds() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.feeds)
}

// Changes implements ledger.Store: the feed starts with a RESET, then carries what
// Emit sends, until ctx ends. It never takes an error queued by FailNext (a hub
// subscribes at a time of its own choosing).
func (m *Memory) Changes(ctx context.Context) (<-chan ledger.Change, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := &feed{in: make(chan ledger.Change), done: make(chan struct{})}
	out := make(chan ledger.Change, 1)
	out <- ledger.Change{Kind: ledger.ChangeReset}
	m.feeds = append(m.feeds, f)
	go func() {
		defer close(out)
		defer m.removeFeed(f)
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-f.in:
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func (m *Memory) removeFeed(f *feed) {
	close(f.done)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, g := range m.feeds {
		if g == f {
			m.feeds = append(m.feeds[:i], m.feeds[i+1:]...)
			return
		}
	}
}
