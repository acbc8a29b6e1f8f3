package app

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/engine"
	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/engine/materialize"
	"github.com/llmgw/gateway/accounting/store"
)

// The ledger engines --ledger-engine chooses between.
const (
	EngineJournal = "journal"
	EngineStore   = "store"
)

// ledgerShard is the one shard built so far: every account belongs to it.
const ledgerShard = 0

// owner is the journal engine running in this process, as owner or standby.
type owner struct {
	engine *engine.Engine
	store  engine.Store
	done   chan struct{}
}

// startOwner starts the engine on st's database: the journal, the import of the
// store's tables the first time, the materializer of the derived tables.
func startOwner(ctx context.Context, cfg Config, log *zap.Logger, st *store.Store) (*owner, error) {
	pool := st.Pool()
	j := journal.New(pool, ledgerShard)
	e := engine.New(j, engine.Options{
		Addr:          cfg.Advertise,
		TakeoverGrace: ExpiryGrace,
		Lease:         cfg.LedgerLease,
		Logger:        log.Named("owner"),
		Import:        func(ctx context.Context) (machine.Snapshot, error) { return materialize.Load(ctx, pool) },
	})
	o := &owner{engine: e, store: engine.Store{Engine: e, Reports: st}, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		if err := e.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("ledger engine stopped", zap.Error(err))
		}
	}()
	// The owner writes the derived tables; a standby starts doing it when it takes over.
	go func() {
		for !e.Owning() {
			select {
			case <-ctx.Done():
				return
			case <-e.Failed():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err := engine.Materialize(ctx, j, pool, ledgerShard, log.Named("materialize")); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("materializing the journal stopped", zap.Error(err))
		}
	}()
	return o, nil
}

func (o *owner) wait() { <-o.done }
