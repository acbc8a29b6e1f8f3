package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// Journal is the durable log the owner appends to and a standby follows
// (accounting/engine/journal implements it over PostgreSQL).
type Journal interface {
	Acquire(ctx context.Context, owner, addr string, ttl time.Duration) (journal.Lease, error)
	Claim(ctx context.Context, owner, addr string, ttl time.Duration) (journal.Lease, error)
	Renew(ctx context.Context, epoch int64, ttl time.Duration) (journal.Lease, error)
	Release(ctx context.Context, epoch int64) error
	Current(ctx context.Context) (journal.Lease, error)
	Append(ctx context.Context, epoch int64, recs []journal.Record) error
	Read(ctx context.Context, after int64, limit int) ([]journal.Record, error)
	Last(ctx context.Context) (int64, error)
	SaveSnapshot(ctx context.Context, seq int64, body []byte) error
	LatestSnapshot(ctx context.Context) (int64, []byte, error)
}

// Options tune an Engine. The zero value is ready to use.
type Options struct {
	// Name identifies this process as an owner; it must differ between processes
	// (default: host name, process id and random bits).
	Name string
	// Addr is where clients reach this process, told to callers of a standby.
	Addr string
	// AddrBound says this process listens on Addr itself, a specific IP and port no
	// other live process can hold: a live lease that names Addr belongs to a process
	// that is gone (a restart after a crash), and is claimed at once instead of after
	// it lapses.
	AddrBound bool
	// Lease is how long ownership lasts without a renewal (default DefaultLease): a
	// dead owner is replaced within about that long.
	Lease time.Duration
	// Poll is how often a standby reads the journal's new records (default 50 ms).
	Poll time.Duration
	// MaxBatch caps the operations one journal append decides (default 4096).
	MaxBatch int
	// SettleDelay is how long a batch of settlements only (commits, releases, renewals,
	// expiries) may wait for another operation to share its journal append (default
	// 10 ms; negative: never). Their callers are off the clients' path; any other
	// operation, reads included, flushes the batch at once.
	SettleDelay time.Duration
	// SnapshotEvery is the fewest events between snapshots (default 200,000). A state
	// holding more reservations than that (settled ones are kept ForgetAfter) waits as
	// many events as it holds: a snapshot costs in proportion to the state, so its cost
	// per event stays bounded, and a restart replays no more events than it loads.
	SnapshotEvery int64
	// ForgetAfter is how long a settled reservation stays in memory for retried
	// settlements (default 1 h); ForgetEvery how often that is pruned (default 1 min).
	ForgetAfter, ForgetEvery time.Duration
	// DefaultTTL is a reservation's lease when the request names none (default 10 min).
	DefaultTTL time.Duration
	// TakeoverGrace, when positive, is given at a takeover to every hold whose lease ran
	// out while no owner could renew it (the clients renewing it were waiting for one).
	TakeoverGrace time.Duration
	// Now is the clock of every decision; nil means time.Now.
	Now func() time.Time
	// Import builds the state of a journal that has none yet (the migration from the
	// tables of the PostgreSQL store); nil means an empty ledger.
	Import func(ctx context.Context) (machine.Snapshot, error)
	// Materialize, when set, is called by the owner with the journal's events in order,
	// off the write path (the derived tables).
	Logger *zap.Logger
}

func (o *Options) defaults() {
	if o.Name == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Name = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Poll <= 0 {
		o.Poll = 50 * time.Millisecond
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 4096
	}
	if o.SettleDelay == 0 {
		o.SettleDelay = 10 * time.Millisecond
	}
	if o.SnapshotEvery <= 0 {
		o.SnapshotEvery = 200_000
	}
	if o.ForgetAfter <= 0 {
		o.ForgetAfter = time.Hour
	}
	if o.ForgetEvery <= 0 {
		o.ForgetEvery = time.Minute
	}
	if o.DefaultTTL <= 0 {
		o.DefaultTTL = 10 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

// DefaultLease is the owner's lease unless configured: renewed every quarter of it, so
// a dead owner is replaced about a second after it died — within the admission's time
// budget, which waits for the new owner. The price: an owner that cannot renew for a
// second (a stalled database, a process starved of CPU) loses the ledger to a standby
// and rebuilds itself as one; and four renewals a second.
const DefaultLease = time.Second

// ErrStopped answers the calls in flight when the owner stopped (fail-stop).
var ErrStopped = fmt.Errorf("ledger owner stopped: %w", ledger.ErrUnavailable)

// Engine is one process's part in owning a shard: standby until it holds the lease,
// owner after. Its ledger.Store methods answer only while it owns.
type Engine struct {
	opts Options
	j    Journal
	log  *zap.Logger

	ops    chan *op
	owning atomic.Bool
	// ownerAddr is where the owner is, as this process last saw it.
	ownerAddr atomic.Pointer[string]
	// leaseEnd is the local time (UnixNano) until which this owner's lease surely holds.
	leaseEnd atomic.Int64
	// contact is when (UnixNano) the journal last answered this process: a read, a
	// lease taken, renewed or found held by another.
	contact atomic.Int64
	// durable is the last seq the journal holds (owner) or this state folded (standby).
	durable atomic.Int64

	// hurry wakes the materializer for a report that waits for it; materialized is the
	// last seq it wrote, while materializing says it runs in this process.
	hurry         chan struct{}
	materialized  atomic.Int64
	materializing atomic.Bool
	// opsDecided counts the Reserve, Commit and Release operations decided.
	opsDecided atomic.Int64

	// lateRefused counts the operations not decided because their caller's context
	// ended before the decide loop reached them.
	lateRefused atomic.Int64

	// appends and appended count the journal appends and their records.
	appends, appended atomic.Int64
	// appendErrors counts the journal appends that failed for a reason other than a
	// takeover (fenced) or the owner's own stop; takeovers the times this process
	// became the owner.
	appendErrors, takeovers atomic.Int64

	failed chan struct{} // closed when Run returned
	// known is closed once this process first owned the ledger or learned its owner:
	// until then a call waits for it rather than being refused at start-up.
	known     chan struct{}
	knownOnce sync.Once
	lastErr   atomic.Pointer[error]
	stops     atomic.Int64
	// name is this incarnation's owner name: Options.Name and a counter.
	name string

	// Owned by the goroutine running Run.
	state *machine.State
	seq   int64
	epoch int64
	snap  int64 // seq of the last snapshot taken
	// saving is set while a snapshot is being made and saved off the loop.
	saving atomic.Bool

	// onTakeover, in tests, runs when this process became the owner.
	onTakeover func(epoch int64)
}

type op struct {
	// ctx is the caller's: an operation whose caller gave up before the decide loop
	// reached it is not decided (nil: an internal operation, always decided).
	ctx  context.Context
	cmd  machine.Command
	ans  machine.Answer
	done chan struct{}
	// audit, when set, is recorded with the change (audit.go).
	audit *ledger.AuditNote
}

// New returns an engine on j; Run makes it work.
func New(j Journal, opts Options) *Engine {
	opts.defaults()
	e := &Engine{opts: opts, j: j, log: opts.Logger, ops: make(chan *op, 4*opts.MaxBatch), failed: make(chan struct{}),
		hurry: make(chan struct{}, 1), known: make(chan struct{})}
	none := ""
	e.ownerAddr.Store(&none)
	return e
}

// Failed is closed once Run returned (its context ended): the engine answers nothing
// more.
func (e *Engine) Failed() <-chan struct{} { return e.failed }

// Err is why the owner last stopped (nil when it never did): a failed journal write,
// a takeover by another process (fenced), or Run's context.
func (e *Engine) Err() error {
	if p := e.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Stops is how many times this process stopped owning the ledger and rebuilt itself
// as a standby.
func (e *Engine) Stops() int64 { return e.stops.Load() }

// SetAddr sets Options.Addr and AddrBound; it must be called before Run.
func (e *Engine) SetAddr(addr string, bound bool) { e.opts.Addr, e.opts.AddrBound = addr, bound }

// OwnerAddr is where the shard's owner is, as this process last saw it ("" when not
// known yet).
func (e *Engine) OwnerAddr() string { return *e.ownerAddr.Load() }

// Owning reports whether this process is the shard's owner now.
func (e *Engine) Owning() bool { return e.owning.Load() }

// Ready says whether this process can take the ledger's calls now (nil), or why not:
// it owns the ledger and its lease is in force, or it is a standby that heard from the
// journal within fresh (so it follows it and can take over) and knows an owner other
// than itself. A replica fenced or cut off from the database is ready again as soon as
// it follows the journal and knows the owner, not only once it owns the ledger again.
func (e *Engine) Ready(fresh time.Duration) error {
	select {
	case <-e.failed:
		return errors.New("the ledger engine stopped")
	default:
	}
	now := time.Now()
	if e.owning.Load() {
		if now.UnixNano() > e.leaseEnd.Load() {
			return errors.New("owner: the lease is not renewed")
		}
		return nil
	}
	if last := e.contact.Load(); last == 0 || now.Sub(time.Unix(0, last)) > fresh {
		return errors.New("standby: the journal does not answer")
	}
	if addr := e.OwnerAddr(); addr == "" || addr == e.opts.Addr {
		return errors.New("standby: the owner is not known")
	}
	return nil
}

// heard notes that the journal answered.
func (e *Engine) heard() { e.contact.Store(time.Now().UnixNano()) }

// Stats returns how many journal appends this owner made, how many records they held
// and how many Reserve, Commit and Release operations it decided: operations per
// append is the batching the load gives.
func (e *Engine) Stats() (appends, records, ops int64) {
	return e.appends.Load(), e.appended.Load(), e.opsDecided.Load()
}

// AppendErrors is how many journal appends failed in the journal (a database error,
// a record that did not encode): each stopped the owner. An append fenced by a
// takeover, or cut by the owner's own stop, is not counted.
func (e *Engine) AppendErrors() int64 { return e.appendErrors.Load() }

// Takeovers is how many times this process became the ledger's owner (at start
// included).
func (e *Engine) Takeovers() int64 { return e.takeovers.Load() }

// LateRefused is how many operations were not decided because their caller's
// deadline passed (or it cancelled) while they queued for the decide loop.
func (e *Engine) LateRefused() int64 { return e.lateRefused.Load() }

// Durable is the last journal seq this process's state holds durably.
func (e *Engine) Durable() int64 { return e.durable.Load() }

// stopOwning ends this incarnation's ownership: calls are refused from now on.
func (e *Engine) stopOwning(err error) {
	e.owning.Store(false)
	e.lastErr.Store(&err)
}

// Run loads the state, follows the journal as a standby until the lease is free, then
// owns the shard, until ctx ends. When the owner stops (fail-stop: a journal write
// failed, another process took over), its memory is dropped, never rolled back: the
// process starts again as a standby, rebuilding the state from the journal, under a
// new owner name (so a new epoch). Run returns ctx's error.
func (e *Engine) Run(ctx context.Context) error {
	defer close(e.failed)
	for incarnation := 1; ; incarnation++ {
		err := e.run(ctx, incarnation)
		if ctx.Err() != nil {
			e.stopOwning(ctx.Err())
			return ctx.Err()
		}
		e.stopOwning(err)
		e.stops.Add(1)
		e.log.Error("ledger owner stopped; rebuilding from the journal as a standby", zap.Error(err))
		select {
		case <-ctx.Done():
		case <-time.After(restartDelay(e.opts.Lease)):
		}
	}
}

// restartDelay is the pause before a stopped owner rebuilds itself: long enough not
// to hammer a failing database, short against the lease.
func restartDelay(lease time.Duration) time.Duration { return min(time.Second, lease/4) }

func (e *Engine) run(ctx context.Context, incarnation int) error {
	e.name = fmt.Sprintf("%s/%d", e.opts.Name, incarnation)
	e.state, e.seq, e.epoch, e.snap = nil, 0, 0, 0
	if err := e.load(ctx); err != nil {
		return fmt.Errorf("load the ledger: %w", err)
	}
	if err := e.follow(ctx); err != nil {
		return err
	}
	return e.own(ctx)
}

// markKnown records that this process owns the ledger or knows where its owner is.
func (e *Engine) markKnown() { e.knownOnce.Do(func() { close(e.known) }) }

// do hands c to the owner and waits for its answer. A call made while the process is
// still starting (neither owning nor knowing that another process owns the ledger)
// waits until it knows, at most two leases.
func (e *Engine) do(ctx context.Context, c machine.Command) (machine.Answer, error) {
	return e.submit(ctx, c, nil)
}

// submit is do for a command recorded in the audit log with note (nil: not).
func (e *Engine) submit(ctx context.Context, c machine.Command, note *ledger.AuditNote) (machine.Answer, error) {
	if !e.owning.Load() {
		wait := time.NewTimer(2 * e.opts.Lease)
		select {
		case <-e.known:
		case <-e.failed:
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return machine.Answer{}, ctx.Err()
		}
		wait.Stop()
		if !e.owning.Load() {
			return machine.Answer{}, e.notOwner()
		}
	}
	o := &op{ctx: ctx, cmd: c, done: make(chan struct{}), audit: note}
	select {
	case e.ops <- o:
	case <-e.failed:
		return machine.Answer{}, ErrStopped
	case <-ctx.Done():
		return machine.Answer{}, ctx.Err()
	}
	select {
	case <-o.done:
		return o.ans, o.ans.Err
	case <-e.failed:
		// Queued as the owner stopped: maybe never decided, maybe decided and not
		// durable. A retry by the same id, at the next owner, finds what landed.
		return machine.Answer{}, ErrStopped
	case <-ctx.Done():
		// The decision may still land; a retry by the same id finds it.
		return machine.Answer{}, ctx.Err()
	}
}

func (e *Engine) notOwner() error {
	select {
	case <-e.failed:
		return ErrStopped
	default:
	}
	return &ledger.NotOwnerError{Addr: *e.ownerAddr.Load()}
}

// refuseQueued answers every queued call with notOwner: a standby's calls that came in
// as its ownership ended.
func (e *Engine) refuseQueued() {
	for {
		select {
		case o := <-e.ops:
			o.ans = machine.Answer{Err: e.notOwner()}
			close(o.done)
		default:
			return
		}
	}
}

// now is a decision's time, at the journal's precision.
func (e *Engine) now() time.Time { return e.opts.Now().UTC().Truncate(time.Microsecond) }

var errFenced = errors.New("fenced: another process owns the ledger")
