package materialize

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// Materializer writes one shard's events into the derived tables. It is not safe for
// concurrent use; two Materializers of one shard (an owner and a standby taking over)
// take turns on the shard's ledger_materialized row, and the second skips what the
// first wrote.
//
// What it writes, and what it does not:
//   - accounts: created; balance (top-ups, charges), reserved and the in-flight pools
//     (holds and their settlements), topped_up, suspended, label. Not the
//     requests-per-minute window (rpm_minute, rpm_count): only the owner's decisions
//     read it, so it keeps the value it had when the store stopped deciding.
//   - tiers, api_keys: as put, created and changed (the NOTIFY triggers fire as they did
//     for the store's own updates: an account's only when its flags are written).
//   - ledger_entries: a top-up entry per ToppedUp, a charge entry per Committed: one
//     row per charge, which statements and reconciliation read.
//   - usage_daily: each call's charges added per account, UTC day, key, model, channel,
//     upstream model and project, one row each however many charges the call has.
//   - key_spend: held and committed, per window of the reservation's creation time.
//   - video_tasks.
//   - projects: created, changed and deleted (marked, never removed); api_keys'
//     project and rates as placed; and each charge's project (ledger_entries.project_id,
//     usage_daily.project_id): the one its key was in when the request was admitted,
//     where the ledger held and charged it.
//   - accounts.low_balance; each alert into the webhook outbox (webhook_events, and a
//     webhook_deliveries row per subscribed webhook of its account).
//   - audit_log: each admin change's audit entry (machine.Audited), with its change.
//   - No row per reservation: a hold lives in the owner's state and the journal, and
//     its settlement in its charge entry (when it charged) and the counters above. The
//     reservations table and its archive keep the rows the store engine and the
//     materializer wrote before migration 0023; nothing adds to them.
//
// A Committed or Released event names only its reservation, so the Materializer keeps
// the held reservations (their Reserved events) of its shard, started from a snapshot,
// with the project each was admitted in; and, for that, the project of every key in
// one.
type Materializer struct {
	pool  *pgxpool.Pool
	shard int
	seq   int64 // the last event folded
	folded
}

// folded is what the Materializer follows of the events besides writing them.
type folded struct {
	holds       map[string]machine.Reserved // held reservations, by id
	heldProject map[string]string           // a held reservation's project, when it has one
	keyProject  map[string]string           // a key's project, when it is in one
}

// New returns the Materializer of shard on pool whose held reservations are those of
// from, the state after the event seq (0: before the first). Its first Apply must start
// at the event after seq; events at or below the shard's stored seq are only folded,
// not written, so it may start from a snapshot older than what was written.
func New(pool *pgxpool.Pool, shard int, from machine.Snapshot, seq int64) *Materializer {
	m := &Materializer{pool: pool, shard: shard, seq: seq, folded: folded{holds: make(map[string]machine.Reserved),
		heldProject: make(map[string]string), keyProject: make(map[string]string)}}
	for _, r := range from.Reservations {
		if r.State == ledger.StateHeld {
			m.holds[r.ID] = machine.Reserved{ID: r.ID, RequestID: r.RequestID, AccountID: r.AccountID,
				KeyID: r.KeyID, Model: r.Model, Amount: r.Amount, Pool: r.Pool, At: r.CreatedAt, ExpiresAt: r.ExpiresAt}
			if len(r.Projects) > 0 {
				m.heldProject[r.ID] = r.Projects[0]
			}
		}
	}
	for _, k := range from.Keys {
		if k.ProjectID != "" {
			m.keyProject[k.ID] = k.ProjectID
		}
	}
	return m
}

// Seq returns the last event seq written for the shard (0: none).
func (m *Materializer) Seq(ctx context.Context) (int64, error) {
	var seq int64
	err := m.pool.QueryRow(ctx, `SELECT seq FROM ledger_materialized WHERE shard = $1`, m.shard).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("materialize: seq: %w", err)
	}
	return seq, nil
}

// Apply writes events (in journal order; seqs[i] is events[i]'s seq, increasing) in one
// transaction and moves the shard's stored seq to the last of them. Events at or below
// the stored seq were written before and are only folded into the held reservations; a
// call whose every seq is at or below it writes nothing. On an error nothing is written
// or folded, and the same call may be made again.
func (m *Materializer) Apply(ctx context.Context, seqs []int64, events []machine.Event) error {
	if len(seqs) != len(events) {
		return fmt.Errorf("materialize: %d seqs for %d events", len(seqs), len(events))
	}
	// Skip what is already folded.
	first := 0
	for first < len(seqs) && seqs[first] <= m.seq {
		first++
	}
	seqs, events = seqs[first:], events[first:]
	for i := range seqs {
		if i > 0 && seqs[i] <= seqs[i-1] {
			return fmt.Errorf("materialize: seq %d after %d", seqs[i], seqs[i-1])
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	f := folding{holds: newOverlay(m.holds), heldProject: newOverlay(m.heldProject), keyProject: newOverlay(m.keyProject)}
	err := pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		var stored int64
		// Takes the shard's row lock (made on first use) for the transaction.
		err := tx.QueryRow(ctx, `
			INSERT INTO ledger_materialized AS l (shard, seq) VALUES ($1, 0)
			ON CONFLICT (shard) DO UPDATE SET seq = l.seq
			RETURNING seq`, m.shard).Scan(&stored)
		if err != nil {
			return err
		}
		var w writes
		for i, e := range events {
			if err := w.add(e, &f, seqs[i] > stored); err != nil {
				return err
			}
		}
		if seqs[len(seqs)-1] <= stored {
			return nil
		}
		b := w.batch()
		b.Queue(`UPDATE ledger_materialized SET seq = $2 WHERE shard = $1`, m.shard, seqs[len(seqs)-1])
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		return w.copyEntries(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("materialize: events %d..%d: %w", seqs[0], seqs[len(seqs)-1], err)
	}
	f.holds.commit()
	f.heldProject.commit()
	f.keyProject.commit()
	m.seq = seqs[len(seqs)-1]
	return nil
}

// folding is folded as a call's events change it, kept apart until the call's
// transaction commits.
type folding struct {
	holds       overlay[machine.Reserved]
	heldProject overlay[string]
	keyProject  overlay[string]
}

// overlay is a map as a call's events change it, kept apart from base until the call's
// transaction commits.
type overlay[V any] struct {
	base    map[string]V
	changed map[string]*V // nil: removed
}

func newOverlay[V any](base map[string]V) overlay[V] {
	return overlay[V]{base: base, changed: make(map[string]*V)}
}

func (o *overlay[V]) get(id string) (V, bool) {
	if v, ok := o.changed[id]; ok {
		if v == nil {
			var zero V
			return zero, false
		}
		return *v, true
	}
	v, ok := o.base[id]
	return v, ok
}

func (o *overlay[V]) put(id string, v V) { o.changed[id] = &v }
func (o *overlay[V]) drop(id string)     { o.changed[id] = nil }

func (o *overlay[V]) commit() {
	for id, v := range o.changed {
		if v == nil {
			delete(o.base, id)
		} else {
			o.base[id] = *v
		}
	}
}
