package ctl_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
)

// fakeHooks keeps webhooks in memory, as alerts.Webhooks answers.
type fakeHooks struct{ hooks map[string]ledger.Webhook }

func (f *fakeHooks) CreateWebhook(_ context.Context, acct, url string, events []string, allow bool) (ledger.Webhook, error) {
	h := ledger.Webhook{ID: "0f000000-0000-4000-8000-000000000001", AccountID: acct, URL: url, Events: events,
		Secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmU=", AllowPrivate: allow,
		CreatedAt: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}
	f.hooks[h.ID] = h
	return h, nil
}

func (f *fakeHooks) ListWebhooks(_ context.Context, acct string) ([]ledger.Webhook, error) {
	var out []ledger.Webhook
	for _, h := range f.hooks {
		if h.AccountID == acct {
			out = append(out, h)
		}
	}
	return out, nil
}

func (f *fakeHooks) GetWebhook(_ context.Context, id string) (ledger.Webhook, error) {
	h, ok := f.hooks[id]
	if !ok {
		return ledger.Webhook{}, ledger.ErrNotFound
	}
	h.Secret = ""
	return h, nil
}

func (f *fakeHooks) DeleteWebhook(_ context.Context, id string) error {
	if _, ok := f.hooks[id]; !ok {
		return ledger.ErrNotFound
	}
	delete(f.hooks, id)
	return nil
}

func (f *fakeHooks) TestWebhook(_ context.Context, id string) (string, error) {
	if _, ok := f.hooks[id]; !ok {
		return "", ledger.ErrNotFound
	}
	return "evt_test_1", nil
}

func (f *fakeHooks) WebhookDeliveries(_ context.Context, id string, limit int) ([]ledger.WebhookDelivery, error) {
	status, at := 500, time.Date(2026, 5, 1, 0, 0, 1, 0, time.UTC)
	return []ledger.WebhookDelivery{
		{EventID: "evt_2", Type: "balance.low", Attempts: 1, LastStatus: &status, NextAttemptAt: &at},
		{EventID: "evt_1", Type: "webhook.test", Attempts: 1, LastStatus: ptrInt(204), DeliveredAt: &at},
	}[:min(limit, 2)], nil
}

func ptrInt(v int) *int { return &v }

func TestWebhookCommands(t *testing.T) {
	f := servertest.Start(t, servertest.NewMemory(), servertest.Options{Webhooks: &fakeHooks{hooks: map[string]ledger.Webhook{}}})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr}
	id := decode(t, run(t, env, "account", "create"))["id"].(string)

	h := decode(t, run(t, env, "webhook", "create", "--account", id, "--url", "http://127.0.0.1:9/h",
		"--events", "balance.low,budget.threshold", "--allow-private"))
	if got, want := keysOf(h), []string{"account_id", "allow_private", "created_at", "events", "id", "secret", "url"}; !reflect.DeepEqual(got, want) {
		t.Errorf("create fields %v, want %v", got, want)
	}
	if h["secret"] != "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmU=" || !reflect.DeepEqual(h["events"], []any{"balance.low", "budget.threshold"}) {
		t.Errorf("create %v", h)
	}
	list := decode(t, run(t, env, "webhook", "list", "--account", id))["webhooks"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["secret"] != nil {
		t.Errorf("list %v: one webhook, never its secret", list)
	}
	if got := decode(t, run(t, env, "webhook", "test", h["id"].(string))); got["event_id"] != "evt_test_1" {
		t.Errorf("test %v", got)
	}
	ds := decode(t, run(t, env, "webhook", "deliveries", h["id"].(string), "--limit", "5"))["deliveries"].([]any)
	d0, d1 := ds[0].(map[string]any), ds[1].(map[string]any)
	if got, want := keysOf(d0), []string{"attempts", "delivered_at", "event_id", "last_status", "next_attempt_at", "type"}; !reflect.DeepEqual(got, want) {
		t.Errorf("delivery fields %v, want %v", got, want)
	}
	if d0["delivered_at"] != nil || d0["next_attempt_at"] == nil || d1["delivered_at"] == nil || d1["next_attempt_at"] != nil {
		t.Errorf("deliveries %v", ds)
	}
	if r := run(t, env, "webhook", "delete", "nope"); r.code == 0 {
		t.Errorf("deleting an unknown webhook: %+v", r)
	}
	decode(t, run(t, env, "webhook", "delete", h["id"].(string)))
	if r := run(t, env, "webhook", "create", "--account", id); r.code != 2 {
		t.Errorf("create without --url: %+v", r)
	}

	acct := decode(t, run(t, env, "account", "update", id, "--low-balance", "2.5"))
	if acct["low_balance"] != json.Number("2.5") {
		t.Errorf("low_balance %v", acct["low_balance"])
	}
	if got := decode(t, run(t, env, "account", "show", id))["low_balance"]; got != json.Number("2.5") {
		t.Errorf("show: low_balance %v", got)
	}
	if got := decode(t, run(t, env, "account", "update", id, "--no-low-balance")); got["low_balance"] != nil {
		t.Errorf("cleared: low_balance %v", got["low_balance"])
	}
	if r := run(t, env, "account", "update", id, "--low-balance", "1", "--no-low-balance"); r.code != 2 {
		t.Errorf("both: %+v", r)
	}
}
