package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/metrics"
)

// fakeArchiver answers ArchiveSettled from a script of batch sizes and errors.
type fakeArchiver struct {
	script []any // int: moved; error: failed
	ages   []time.Duration
	limits []int
}

func (f *fakeArchiver) ArchiveSettled(_ context.Context, olderThan time.Duration, limit int) (int, error) {
	f.ages, f.limits = append(f.ages, olderThan), append(f.limits, limit)
	if len(f.script) == 0 {
		return 0, nil
	}
	next := f.script[0]
	f.script = f.script[1:]
	if err, ok := next.(error); ok {
		return 0, err
	}
	return next.(int), nil
}

// noExpiry is a ledger with nothing to expire.
type noExpiry struct{ ledger.Decisions }

func (noExpiry) ExpireDue(context.Context, int) (int, error) { return 0, nil }

// A sweep archives in batches until one comes back short, counts what moved, and logs a
// failure once when it starts and once when it ends.
func TestSweeperArchivesSettledReservations(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	fa := &fakeArchiver{script: []any{archiveBatch, archiveBatch, 3, errors.New("database down"), errors.New("database down"), 0}}
	moved := 0
	m := metrics.New()
	sw := &sweeper{store: noExpiry{}, log: zap.New(core), archiveAfter: 20 * time.Minute,
		archive: m.CountArchive(func(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
			n, err := fa.ArchiveSettled(ctx, olderThan, limit)
			moved += n
			return n, err
		})}
	ctx := context.Background()

	sw.sweep(ctx)
	if moved != 2*archiveBatch+3 || len(fa.ages) != 3 {
		t.Fatalf("moved %d in %d calls, want %d in 3", moved, len(fa.ages), 2*archiveBatch+3)
	}
	for i, age := range fa.ages {
		if age != 20*time.Minute || fa.limits[i] != archiveBatch {
			t.Errorf("call %d archived up to %d settled %v ago, want %d settled 20m ago", i, fa.limits[i], age, archiveBatch)
		}
	}
	sw.sweep(ctx)
	sw.sweep(ctx)
	sw.sweep(ctx)
	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Message)
	}
	want := []string{"archiving settled reservations failed", "archiving settled reservations works again"}
	if len(msgs) != len(want) || msgs[0] != want[0] || msgs[1] != want[1] {
		t.Errorf("logs = %q, want %q", msgs, want)
	}

	// A backlog is moved archiveBatches batches a sweep, so the next expiry is never
	// held back by it.
	backlog := make([]any, 3*archiveBatches)
	for i := range backlog {
		backlog[i] = archiveBatch
	}
	fa.script, fa.ages, moved = backlog, nil, 0
	sw.sweep(ctx)
	if len(fa.ages) != archiveBatches || moved != archiveBatches*archiveBatch {
		t.Errorf("one sweep over a backlog made %d calls moving %d, want %d calls", len(fa.ages), moved, archiveBatches)
	}
}

// graceScript records the sweeper's calls in order; its grace fails while down.
type graceScript struct {
	ledger.Decisions
	calls []string
	down  bool
}

func (g *graceScript) ExpireDue(context.Context, int) (int, error) {
	g.calls = append(g.calls, "expire")
	return 0, nil
}

func (g *graceScript) grace(_ context.Context, d time.Duration) (int, error) {
	if g.down {
		g.calls = append(g.calls, "grace failed")
		return 0, errors.New("database down")
	}
	if d != ExpiryGrace {
		return 0, errors.New("not the grace")
	}
	g.calls = append(g.calls, "grace")
	return 3, nil
}

// After accounting was away — started, paused, or cut off from the database — the
// sweeper grants the leases that ran out meanwhile their grace before it expires any,
// and expires nothing until it has.
func TestSweeperGivesLapsedLeasesAGraceAfterAnAbsence(t *testing.T) {
	g := &graceScript{}
	sw := &sweeper{store: g, log: zap.NewNop(), interval: time.Second, grace: g.grace}
	ctx := context.Background()
	step := func(what string, want ...string) {
		t.Helper()
		g.calls = nil
		sw.sweep(ctx)
		if strings.Join(g.calls, ", ") != strings.Join(want, ", ") {
			t.Errorf("%s: calls %q, want %q", what, g.calls, want)
		}
	}
	step("first sweep", "grace", "expire")
	step("next sweep", "expire")
	// A pause (or a stall) longer than awayAfter: the last sweep is that old.
	sw.lastOK.Store(time.Now().Add(-sw.awayAfter() - time.Second).UnixNano())
	step("after a pause", "grace", "expire")
	step("after that", "expire")
	// The database is away as long: nothing is expired before the grace is given.
	sw.lastOK.Store(time.Now().Add(-sw.awayAfter() - time.Second).UnixNano())
	g.down = true
	step("database still away", "grace failed")
	g.down = false
	step("database back", "grace", "expire")
	if sw.away() {
		t.Error("away after a sweep reached the database")
	}
}
