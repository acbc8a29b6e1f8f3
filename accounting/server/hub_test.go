package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/ledger"
)

// feedStore is a ledger.Reports whose only working method is Changes: each call hands
// out the next scripted feed (or error). Other methods are not used by the hub.
type feedStore struct {
	ledger.Reports
	mu    sync.Mutex
	feeds []chan ledger.Change
	errs  []error
	calls int
	ready chan struct{} // receives after each Changes call
}

var _ ledger.Reports = (*feedStore)(nil)

func (f *feedStore) Changes(context.Context) (<-chan ledger.Change, error) {
	f.mu.Lock()
	defer func() { f.mu.Unlock(); f.ready <- struct{}{} }()
	i := f.calls
	f.calls++
	if i < len(f.errs) && f.errs[i] != nil {
		return nil, f.errs[i]
	}
	return f.feeds[i], nil
}

func TestHubFanOutReconnectAndLag(t *testing.T) {
	feed1, feed2 := make(chan ledger.Change), make(chan ledger.Change)
	fs := &feedStore{
		feeds: []chan ledger.Change{nil, feed1, feed2},
		errs:  []error{errors.New("database down")},
		ready: make(chan struct{}, 8),
	}
	h := NewHub(fs, zap.NewNop(), 2)
	h.retry = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	fast, _ := h.subscribe()
	slow, _ := h.subscribe()
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()

	next := func(s *subscription) ledger.Change {
		t.Helper()
		c, ok, err := s.next(ctx)
		if !ok || err != nil {
			t.Fatalf("next: ok=%v err=%v", ok, err)
		}
		return c
	}
	// The first Changes call fails: the hub tells watchers to RESET, then retries.
	<-fs.ready
	<-fs.ready
	if c := next(fast); c.Kind != ledger.ChangeReset {
		t.Fatalf("after a failed subscription got %v, want RESET", c)
	}
	for i := range 5 {
		feed1 <- ledger.Change{Kind: ledger.ChangeKey, KeyID: string(rune('a' + i))}
		if c := next(fast); c.KeyID != string(rune('a'+i)) {
			t.Fatalf("fast got %v, want key %c", c, 'a'+i)
		}
	}
	// slow (buffer 2) held the RESET and "a"; "b".. overflowed: it gets one RESET.
	if c := next(slow); c.Kind != ledger.ChangeReset {
		t.Fatalf("slow got %v, want RESET", c)
	}
	select {
	case c := <-slow.ch:
		t.Fatalf("slow kept a superseded change %v", c)
	default:
	}

	// The feed ends (a reconnect): every watcher is told to RESET.
	close(feed1)
	<-fs.ready
	for _, s := range []*subscription{fast, slow} {
		if c := next(s); c.Kind != ledger.ChangeReset {
			t.Fatalf("after the feed ended got %v, want RESET", c)
		}
	}
	feed2 <- ledger.Change{Kind: ledger.ChangeAccount, AccountID: "acct"}
	for _, s := range []*subscription{fast, slow} {
		if c := next(s); c.AccountID != "acct" {
			t.Fatalf("after reconnect got %v", c)
		}
	}

	// Stopping the hub closes every subscription and refuses new ones.
	cancel()
	<-done
	if _, ok, _ := fast.next(context.Background()); ok {
		t.Fatal("subscription still open after the hub stopped")
	}
	if _, ok := h.subscribe(); ok {
		t.Fatal("subscribed to a stopped hub")
	}
}
