package alerts

import (
	"context"
	"fmt"
	"time"
)

// DefaultRetention is accounting's --webhook-retention default, and MinRetention the
// shortest it accepts (a delivery stays readable with gatewayctl webhook deliveries at
// least that long).
const (
	DefaultRetention = 30 * 24 * time.Hour
	MinRetention     = time.Hour
)

// Prune deletes what the outbox no longer needs, older than olderThan (by w.Now, else
// the database's clock): up to limit deliveries delivered that long ago, then up to
// limit events created that long ago that no delivery refers to any more (each of
// their webhooks got them, or they had none). It returns how many rows it deleted. A
// delivery not delivered (due, given up, or dropped with its webhook) is never deleted,
// nor its event. Any number of processes may run it at once (SKIP LOCKED); it is
// accounting's sweeper's, beside the archive of settled reservations.
//
// An event is written once, by the materializer in the transaction that moves the
// journal position past its decision; deleting it long after never lets it be written
// again.
func (w *Webhooks) Prune(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	if olderThan < MinRetention {
		return 0, fmt.Errorf("alerts: webhook deliveries are kept %v at least", MinRetention)
	}
	if limit <= 0 {
		return 0, nil
	}
	var at *time.Time
	if w.Now != nil {
		t := w.Now()
		at = &t
	}
	tag, err := w.Pool.Exec(ctx, `
		WITH picked AS (
			SELECT webhook_id, event_id FROM webhook_deliveries
			WHERE delivered_at < coalesce($1::timestamptz, now()) - $2::interval
			ORDER BY delivered_at LIMIT $3 FOR UPDATE SKIP LOCKED)
		DELETE FROM webhook_deliveries d USING picked p
		WHERE d.webhook_id = p.webhook_id AND d.event_id = p.event_id`, at, olderThan, limit)
	if err != nil {
		return 0, fmt.Errorf("alerts: prune deliveries: %w", err)
	}
	n := int(tag.RowsAffected())
	tag, err = w.Pool.Exec(ctx, `
		WITH picked AS (
			SELECT e.id FROM webhook_events e
			WHERE e.created_at < coalesce($1::timestamptz, now()) - $2::interval
				AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
			ORDER BY e.created_at LIMIT $3 FOR UPDATE SKIP LOCKED)
		DELETE FROM webhook_events WHERE id IN (SELECT id FROM picked)`, at, olderThan, limit)
	if err != nil {
		return n, fmt.Errorf("alerts: prune events: %w", err)
	}
	return n + int(tag.RowsAffected()), nil
}
