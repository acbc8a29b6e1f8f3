package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/llmgw/gateway/accounting/engine/journal"
)

// memJournal is an in-memory Journal with the PostgreSQL journal's fencing, and hooks
// that make an append wait or fail.
type memJournal struct {
	mu     sync.Mutex
	recs   []journal.Record
	lease  journal.Lease
	snaps  map[int64][]byte
	latest int64

	// appendHook, when set, runs before an append is applied; an error fails it.
	appendHook func(epoch int64, recs []journal.Record) error
	// paused, when set, holds every append and renewal of that epoch until it is
	// closed: the owner is paused as by SIGSTOP.
	pausedEpoch int64
	paused      chan struct{}
}

// pause holds the current owner's appends and renewals and ends its lease, until the
// returned func resumes it.
func (m *memJournal) pause() (resume func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan struct{})
	m.pausedEpoch, m.paused = m.lease.Epoch, ch
	m.lease.Until = time.Now().Add(-time.Second)
	return func() { close(ch) }
}

// waitIfPaused blocks a call of epoch while that epoch is paused.
func (m *memJournal) waitIfPaused(epoch int64) {
	m.mu.Lock()
	ch := m.paused
	held := ch != nil && epoch == m.pausedEpoch
	m.mu.Unlock()
	if held {
		<-ch
	}
}

func newMemJournal() *memJournal { return &memJournal{snaps: map[int64][]byte{}, latest: -1} }

func (m *memJournal) Acquire(_ context.Context, owner, addr string, ttl time.Duration) (journal.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease.Owner != "" && m.lease.Owner != owner && time.Now().Before(m.lease.Until) {
		return journal.Lease{}, &journal.HeldError{Lease: m.lease}
	}
	m.lease = journal.Lease{Epoch: m.lease.Epoch + 1, Owner: owner, Addr: addr, Until: time.Now().Add(ttl)}
	return m.lease, nil
}

func (m *memJournal) Claim(ctx context.Context, owner, addr string, ttl time.Duration) (journal.Lease, error) {
	m.mu.Lock()
	if m.lease.Addr == addr && addr != "" {
		m.lease.Until = time.Now()
	}
	m.mu.Unlock()
	return m.Acquire(ctx, owner, addr, ttl)
}

func (m *memJournal) Renew(_ context.Context, epoch int64, ttl time.Duration) (journal.Lease, error) {
	m.waitIfPaused(epoch)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease.Epoch != epoch {
		return journal.Lease{}, journal.ErrFenced
	}
	m.lease.Until = time.Now().Add(ttl)
	return m.lease, nil
}

func (m *memJournal) Release(_ context.Context, epoch int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease.Epoch != epoch {
		return journal.ErrFenced
	}
	m.lease.Until = time.Now()
	return nil
}

func (m *memJournal) Current(context.Context) (journal.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lease, nil
}

func (m *memJournal) Append(_ context.Context, epoch int64, recs []journal.Record) error {
	m.waitIfPaused(epoch)
	m.mu.Lock()
	hook := m.appendHook
	m.mu.Unlock()
	if hook != nil {
		if err := hook(epoch, recs); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease.Epoch != epoch {
		return journal.ErrFenced
	}
	for i, r := range recs {
		if r.Seq != int64(len(m.recs))+1 {
			return fmt.Errorf("seq %d after %d (record %d)", r.Seq, len(m.recs), i)
		}
		m.recs = append(m.recs, journal.Record{Seq: r.Seq, Body: append([]byte(nil), r.Body...)})
	}
	return nil
}

func (m *memJournal) Read(_ context.Context, after int64, limit int) ([]journal.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if after >= int64(len(m.recs)) {
		return nil, nil
	}
	end := min(int64(len(m.recs)), after+int64(limit))
	return append([]journal.Record(nil), m.recs[after:end]...), nil
}

func (m *memJournal) Last(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(len(m.recs)), nil
}

func (m *memJournal) SaveSnapshot(_ context.Context, seq int64, body []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snaps[seq] = append([]byte(nil), body...)
	m.latest = max(m.latest, seq)
	return nil
}

func (m *memJournal) LatestSnapshot(context.Context) (int64, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.latest < 0 {
		return 0, nil, nil
	}
	return m.latest, m.snaps[m.latest], nil
}
