package alerts_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/alerts"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// TestPruneDeletesOnlyOldDeliveredAlerts fills the outbox with deliveries of every
// state, old and recent, and prunes it in batches: only the deliveries delivered
// before the retention go, then the old events none of whose deliveries is left;
// a due delivery and one given up (or dropped with its webhook: the same state) stay
// whatever their age, and their events.
func TestPruneDeletesOnlyOldDeliveredAlerts(t *testing.T) {
	ctx := context.Background()
	pool := tablestest.NewPool(t, tablestest.NewDB(t), 4)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	whs := &alerts.Webhooks{Pool: pool, Keys: testKeys(t), Now: func() time.Time { return now }}
	const retention = 30 * 24 * time.Hour
	old, recent := now.Add(-retention-time.Hour), now.Add(-retention+time.Hour)

	hookA, err := whs.CreateWebhook(ctx, acct, "http://127.0.0.1:1/a", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	hookB, err := whs.CreateWebhook(ctx, acct, "http://127.0.0.1:1/b", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	event := func(id string, at time.Time) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO webhook_events (id, account_id, type, body, created_at) VALUES ($1, $2, 'balance.low', '{}', $3)`,
			id, acct, at); err != nil {
			t.Fatal(err)
		}
	}
	// delivery: delivered at delivered (nil: not), due at next (nil: none).
	delivery := func(hook, id string, created time.Time, delivered, next *time.Time) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO webhook_deliveries (webhook_id, event_id, attempts, created_at, first_attempt_at, delivered_at, next_attempt_at)
			VALUES ($1, $2, 1, $3, $3, $4, $5)`, hook, id, created, delivered, next); err != nil {
			t.Fatal(err)
		}
	}
	const batch = 7
	// Old and delivered to both webhooks: 2 × 10 deliveries and 10 events go.
	for i := range 10 {
		id := fmt.Sprintf("evt_old_%02d", i)
		event(id, old)
		delivery(hookA.ID, id, old, &old, nil)
		delivery(hookB.ID, id, old, &old, nil)
	}
	// Old events nobody subscribed to go too.
	for i := range 3 {
		id := fmt.Sprintf("evt_orphan_%d", i)
		event(id, old)
	}
	// Old, delivered to A but due at B: A's delivery goes, the event and B's stay.
	event("evt_half", old)
	delivery(hookA.ID, "evt_half", old, &old, nil)
	delivery(hookB.ID, "evt_half", old, nil, &now)
	// Old and given up (no next attempt, never delivered).
	event("evt_given_up", old)
	delivery(hookA.ID, "evt_given_up", old, nil, nil)
	// Created long ago, delivered within the retention: stays.
	event("evt_late", old)
	delivery(hookA.ID, "evt_late", old, &recent, nil)
	// Recent and delivered: stays.
	event("evt_recent", recent)
	delivery(hookA.ID, "evt_recent", recent, &recent, nil)

	if _, err := whs.Prune(ctx, time.Minute, batch); err == nil {
		t.Error("a retention of a minute was accepted")
	}
	total, calls := 0, 0
	for {
		n, err := whs.Prune(ctx, retention, batch)
		if err != nil {
			t.Fatal(err)
		}
		if n > 2*batch {
			t.Fatalf("one call deleted %d rows, more than a batch of deliveries and one of events (%d each)", n, batch)
		}
		total, calls = total+n, calls+1
		if n == 0 {
			break
		}
	}
	if want := 2*10 + 10 + 3 + 1; total != want {
		t.Errorf("pruned %d rows in %d calls, want %d", total, calls, want)
	}
	var events []string
	rows, _ := pool.Query(ctx, `SELECT id FROM webhook_events ORDER BY id`)
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		events = append(events, id)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if want := []string{"evt_given_up", "evt_half", "evt_late", "evt_recent"}; !slices.Equal(events, want) {
		t.Errorf("events left %v, want %v", events, want)
	}
	var left []string
	rows, _ = pool.Query(ctx, `SELECT d.event_id || '@' || right(w.url, 1) FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id ORDER BY 1`)
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		left = append(left, s)
	}
	if want := []string{"evt_given_up@a", "evt_half@b", "evt_late@a", "evt_recent@a"}; !slices.Equal(left, want) {
		t.Errorf("deliveries left %v, want %v", left, want)
	}
	// What is left is still readable, the pending one still due.
	ds, err := whs.WebhookDeliveries(ctx, hookB.ID, 10)
	if err != nil || len(ds) != 1 || ds[0].EventID != "evt_half" || ds[0].NextAttemptAt == nil {
		t.Errorf("B's deliveries %+v, %v", ds, err)
	}
}
