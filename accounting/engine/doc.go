// Package engine is the ledger's owner: the one process that decides every
// reservation, charge and limit of a shard in memory, with the state machine of
// accounting/engine/machine, and answers a decision only once the journal holds it.
// It implements ledger.Store, so the gRPC server and the sweeper use it as they used
// the PostgreSQL store.
//
// The write path, one batching point:
//
//	gRPC calls ─┐
//	            ├─► ops ─► decide loop ─► batch of events ─► flusher ─► journal (PostgreSQL)
//	sweeper   ──┘          (machine.State,   (seq numbered,     (one fenced INSERT,
//	                        memory only)      codec bytes)       one commit, one fsync)
//	                                                               │
//	answers ◄──────────────────────────────────── batch durable ◄──┘
//
//	journal ─► materializer (async) ─► accounts, api_keys, ledger_entries, usage_daily, …
//	                                    (statements, usage, the console's lists)
//
// The decide loop is one goroutine: it takes every operation queued meanwhile, decides
// each against the state (which already holds the decisions of the batch being
// flushed), and hands the batch to the flusher as soon as the flusher is free, so the
// next batch forms while one flushes and no timer sits on the reserve path. Every
// operation, reads and refusals included, is answered after every batch decided before
// it is durable: nobody sees a decision the journal could still lose.
//
// Fail-stop: a journal write that fails, or a lease that cannot be renewed in time,
// stops the owner for good (Failed is closed). Memory is never rolled back; a new owner
// rebuilds it from the journal. Every batch is fenced by the owner's epoch (see
// accounting/engine/journal), so an owner that was paused while another took over can
// never write again.
//
// A process that is not the owner is a standby: it folds the journal into its own
// state as it grows, answers every call with ledger.ErrNotOwner (which names the
// owner's address), and takes over when the owner's lease lapses.
//
// It must not import gRPC or the server: it is the ledger, not its wire.
package engine
