package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/ledger"
)

// DefaultSubscriberBuffer is how many changes a watcher may fall behind before it is
// sent a RESET instead of the changes it missed.
const DefaultSubscriberBuffer = 256

// Hub fans one Store.Changes subscription out to every WatchChanges stream of the
// process. Publishing never blocks: a subscriber whose buffer is full loses the
// changes that did not fit and is marked lagged, and its stream then sends a RESET
// (which tells the caller to drop its whole cache, so nothing missed can stay cached).
//
// Hub is safe for concurrent use. Run must be called once; subscribers may come and go
// before, during and after it.
type Hub struct {
	store  ledger.Reports // its change feed
	log    *zap.Logger
	buffer int
	// retry is the wait before re-subscribing after the store's feed ends or fails.
	retry time.Duration

	mu     sync.Mutex
	subs   map[*subscription]struct{}
	closed bool
}

// NewHub returns a Hub over store. buffer ≤ 0 means DefaultSubscriberBuffer.
func NewHub(store ledger.Reports, log *zap.Logger, buffer int) *Hub {
	if buffer <= 0 {
		buffer = DefaultSubscriberBuffer
	}
	return &Hub{store: store, log: log, buffer: buffer, retry: time.Second, subs: map[*subscription]struct{}{}}
}

// subscription is one watcher's queue. Only the hub sends on ch and closes it.
type subscription struct {
	ch     chan ledger.Change
	wake   chan struct{} // capacity 1: a lag happened
	lagged atomic.Bool
}

// Run feeds the hub from the store until ctx ends, re-subscribing (and telling every
// watcher to RESET) whenever the store's feed ends early. When Run returns, every
// subscription is closed, which ends the streams: do this before a graceful stop,
// because watch streams never end on their own.
func (h *Hub) Run(ctx context.Context) {
	defer h.closeAll()
	for ctx.Err() == nil {
		ch, err := h.store.Changes(ctx)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("change feed unavailable", zap.Error(err))
			}
		} else {
			h.forward(ctx, ch)
		}
		if ctx.Err() != nil {
			return
		}
		// The feed ended or never started: changes may be missed until it is back.
		h.publish(ledger.Change{Kind: ledger.ChangeReset})
		t := time.NewTimer(h.retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// forward publishes what ch delivers until it closes or ctx ends.
func (h *Hub) forward(ctx context.Context, ch <-chan ledger.Change) {
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-ch:
			if !ok {
				return
			}
			h.publish(c)
		}
	}
}

func (h *Hub) publish(c ledger.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.ch <- c:
		default:
			s.lagged.Store(true)
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
	}
}

// subscribe adds a watcher; ok is false once the hub has stopped.
func (h *Hub) subscribe() (s *subscription, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	s = &subscription{ch: make(chan ledger.Change, h.buffer), wake: make(chan struct{}, 1)}
	h.subs[s] = struct{}{}
	return s, true
}

func (h *Hub) unsubscribe(s *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.ch)
	}
}

func (h *Hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.ch)
	}
}

// Subscribers returns how many watchers are connected.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// next returns the subscription's next item: a change, or a RESET after a lag (the
// queued changes it supersedes are dropped). ok is false when the subscription was
// closed by the hub; err is ctx's error when ctx ended first.
func (s *subscription) next(ctx context.Context) (c ledger.Change, ok bool, err error) {
	for {
		if s.lagged.Swap(false) {
			s.drain()
			return ledger.Change{Kind: ledger.ChangeReset}, true, nil
		}
		select {
		case <-ctx.Done():
			return ledger.Change{}, false, ctx.Err()
		case c, ok := <-s.ch:
			if !ok {
				return ledger.Change{}, false, nil
			}
			if s.lagged.Load() {
				// This change was queued before the lag; the RESET covers it.
				continue
			}
			return c, true, nil
		case <-s.wake:
		}
	}
}

// drain drops what is queued without blocking.
func (s *subscription) drain() {
	for {
		select {
		case _, ok := <-s.ch:
			if !ok {
				return
			}
		default:
			return
		}
	}
}
