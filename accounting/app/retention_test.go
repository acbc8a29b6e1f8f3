package app_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/app"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// TestSweeperDeletesOldDeliveredAlerts runs accounting with --webhook-retention 1h:
// its sweeper deletes the delivery delivered 2 h ago and its event, and keeps the one
// delivered within the hour and the undelivered one, however old.
func TestSweeperDeletesOldDeliveredAlerts(t *testing.T) {
	db := tablestest.NewDB(t)
	start(t, db, "--sweep-interval", "100ms", "--webhook-retention", "1h")
	ctx := context.Background()
	pool := tablestest.NewPool(t, db, 2)
	const hook, acct = "0d000000-0000-4000-8000-0000000000d1", "0a000000-0000-4000-8000-0000000000d1"
	if _, err := pool.Exec(ctx, `INSERT INTO webhooks (id, account_id, url, secret, allow_private) VALUES ($1, $2, 'http://127.0.0.1:1/', '\x00', true)`,
		hook, acct); err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		id, age, delivered, next string
	}{
		{"evt_old", "2 hours", "2 hours", ""},
		{"evt_recent", "2 hours", "30 minutes", ""},
		{"evt_pending", "3 hours", "", "-1 hour"}, // due in an hour: the worker leaves it alone
	} {
		if _, err := pool.Exec(ctx, `
			WITH e AS (INSERT INTO webhook_events (id, account_id, type, body, created_at) VALUES ($1, $2, 'balance.low', '{}', now() - $3::interval))
			INSERT INTO webhook_deliveries (webhook_id, event_id, attempts, created_at, delivered_at, next_attempt_at)
			VALUES ($4, $1, 1, now() - $3::interval, now() - nullif($5, '')::interval, now() - nullif($6, '')::interval)`,
			e.id, acct, e.age, hook, e.delivered, e.next); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(table string) []string {
		var out []string
		rows, err := pool.Query(ctx, `SELECT `+map[string]string{"webhook_events": "id", "webhook_deliveries": "event_id"}[table]+` FROM `+table+` ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			_ = rows.Scan(&id)
			out = append(out, id)
		}
		return out
	}
	want := []string{"evt_pending", "evt_recent"}
	for deadline := time.Now().Add(10 * time.Second); !slices.Equal(ids("webhook_events"), want); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("events %v after 10 s, want %v", ids("webhook_events"), want)
		}
	}
	if got := ids("webhook_deliveries"); !slices.Equal(got, want) {
		t.Errorf("deliveries %v, want %v", got, want)
	}
}

func TestWebhookRetentionTooShort(t *testing.T) {
	t.Setenv("GATEWAY_SERVICE_TOKEN", serviceToken)
	t.Setenv("GATEWAY_ADMIN_TOKEN", adminToken)
	t.Setenv(app.EnvWebhookRetention, "10m")
	var errb bytes.Buffer
	if code := app.Main(context.Background(), nil, &errb); code != 2 || !strings.Contains(errb.String(), "--webhook-retention must be 0 or at least 1h0m0s") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}
