package materialize

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/alerts"
	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// alertWrites are a call's alerts and low-balance thresholds.
type alertWrites struct {
	alerts     []machine.Alerted
	lowBalance map[string]*ledger.Micros // the last threshold of each account
}

func (w *alertWrites) addAlert(e machine.Event) {
	switch e := e.(type) {
	case machine.Alerted:
		w.alerts = append(w.alerts, e)
	case machine.LowBalanceSet:
		if w.lowBalance == nil {
			w.lowBalance = map[string]*ledger.Micros{}
		}
		w.lowBalance[e.AccountID] = e.Threshold
	}
}

// queueAlerts sets the accounts' thresholds and puts each alert in the outbox: its body
// in webhook_events, a delivery for every webhook of its account that takes its type
// and existed when it was decided. Both are in the transaction that moves the stored
// seq past the event, so an alert is queued exactly once.
func (w *alertWrites) queueAlerts(b *pgx.Batch) {
	if len(w.lowBalance) > 0 {
		var ids []string
		var vals []*int64
		for _, id := range sortedKeys(w.lowBalance) {
			ids = append(ids, id)
			vals = append(vals, (*int64)(w.lowBalance[id]))
		}
		b.Queue(`
			UPDATE accounts a SET low_balance = d.low
			FROM unnest($1::text[], $2::bigint[]) AS d(id, low)
			WHERE a.id = d.id::uuid`, ids, vals)
	}
	if len(w.alerts) == 0 {
		return
	}
	var ids, accts, types, bodies []string
	var ats []time.Time
	for _, a := range w.alerts {
		ids, accts, types = append(ids, a.ID), append(accts, a.AccountID), append(types, a.Type)
		bodies, ats = append(bodies, string(alerts.Body(a))), append(ats, a.At)
	}
	b.Queue(`
		INSERT INTO webhook_events (id, account_id, type, body, created_at)
		SELECT id, account_id::uuid, type, body, created_at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])
			AS e(id, account_id, type, body, created_at)
		ON CONFLICT (id) DO NOTHING`, ids, accts, types, bodies, ats)
	b.Queue(`
		INSERT INTO webhook_deliveries (webhook_id, event_id, next_attempt_at, created_at)
		SELECT h.id, e.id, e.created_at, e.created_at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS e(id, account_id, type, created_at)
		JOIN webhooks h ON h.account_id = e.account_id::uuid AND h.deleted_at IS NULL
			AND h.created_at <= e.created_at AND (cardinality(h.events) = 0 OR e.type = ANY (h.events))
		ON CONFLICT DO NOTHING`, ids, accts, types, ats)
}
