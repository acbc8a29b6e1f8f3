package app

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/engine"
	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/engine/materialize"
	"github.com/llmgw/gateway/accounting/tables"
)

// ledgerShard is the one shard built so far: every account belongs to it.
const ledgerShard = 0

// journalRetention is how long journal records are kept after a snapshot covers them
// (and the derived tables hold them); journalRetentionEvery how often the owner drops
// what is older.
const (
	journalRetention      = 7 * 24 * time.Hour
	journalRetentionEvery = time.Hour
)

// owner is the journal engine running in this process, as owner or standby.
type owner struct {
	engine *engine.Engine
	store  engine.Store
	done   chan struct{}

	// ctx bounds the engine's life: it ends after the gRPC server stopped.
	ctx     context.Context
	matDone chan struct{}

	journal *journal.Journal
	pool    *pgxpool.Pool
	log     *zap.Logger
}

// newOwner makes the engine on st's database: the journal, the import of the store's
// tables the first time. start runs it.
func newOwner(cfg Config, log *zap.Logger, st *tables.Store) *owner {
	pool := st.Pool()
	j := journal.New(pool, ledgerShard)
	e := engine.New(j, engine.Options{
		TakeoverGrace: ExpiryGrace,
		Lease:         cfg.LedgerLease,
		Logger:        log.Named("owner"),
		Import:        func(ctx context.Context) (machine.Snapshot, error) { return materialize.Load(ctx, pool) },
	})
	return &owner{engine: e, store: engine.Store{Engine: e, Reports: st}, done: make(chan struct{}), matDone: make(chan struct{}),
		journal: j, pool: pool, log: log}
}

// start runs the engine, advertising addr to the callers of a standby (bound: this
// process listens on that very IP and port), and the materializer of the derived
// tables while this process owns the ledger.
func (o *owner) start(ctx context.Context, addr string, bound bool) {
	e := o.engine
	e.SetAddr(addr, bound)
	go func() {
		defer close(o.done)
		if err := e.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			o.log.Error("ledger engine stopped", zap.Error(err))
		}
	}()
	// The owner writes the derived tables; a standby starts doing it when it takes over.
	go func() {
		defer close(o.matDone)
		for !e.Owning() {
			select {
			case <-ctx.Done():
				return
			case <-e.Failed():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		go o.retain(ctx)
		if err := e.Materialize(ctx, o.journal, o.pool, ledgerShard, o.log.Named("materialize")); err != nil && !errors.Is(err, context.Canceled) {
			o.log.Error("materializing the journal stopped", zap.Error(err))
		}
	}()
}

// retain drops, every journalRetentionEvery while this process owns the ledger, the
// journal's partitions that a snapshot and the derived tables cover and that are older
// than journalRetention.
func (o *owner) retain(ctx context.Context) {
	t := time.NewTicker(journalRetentionEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !o.engine.Owning() {
			continue
		}
		if n, err := o.journal.DropCovered(ctx, journalRetention); err != nil {
			o.log.Warn("journal retention failed", zap.Error(err))
		} else if n > 0 {
			o.log.Info("journal partitions dropped", zap.Int("partitions", n))
		}
	}
}

// wait returns once the engine stopped and the materializer caught up.
func (o *owner) wait() { <-o.done; <-o.matDone }
