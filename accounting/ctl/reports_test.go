package ctl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestMain drops the template database the PostgreSQL tests made.
func TestMain(m *testing.M) { tablestest.Main(m) }

// agentTurn is an Opus-class agent turn: 2k fresh, 80k cache-read and 5k cache-written
// input tokens and 1k output, 0.10625 credits at the card's prices.
func agentTurn() []*accountingv1.ChargeComponent {
	return []*accountingv1.ChargeComponent{
		{Name: "input", Units: 2_000, PricePerMtok: 5_000_000, AmountMicros: 10_000},
		{Name: "cache_read", Units: 80_000, PricePerMtok: 500_000, AmountMicros: 40_000},
		{Name: "cache_write", Units: 5_000, PricePerMtok: 6_250_000, AmountMicros: 31_250},
		{Name: "output", Units: 1_000, PricePerMtok: 25_000_000, AmountMicros: 25_000},
	}
}

// jsonOf re-encodes v (json.Numbers as strings) for comparison with a literal.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ledger, usage and reconcile show each charge's components and tier, the cache tokens,
// the split by channel, and what a capped charge forgave, against the real store.
func TestReportsShowTheBreakdown(t *testing.T) {
	st, _ := enginetest.NewLedger(t, 4)
	f := servertest.Start(t, st, servertest.Options{})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr}
	ctx := context.Background()
	led := f.Ledger(t, servertest.ServiceToken)

	id := decode(t, run(t, env, "account", "create"))["id"].(string)
	decode(t, run(t, env, "account", "topup", id, "--amount", "10"))
	key := decode(t, run(t, env, "key", "create", "--account", id))["id"].(string)
	for i, hold := range []int64{200_000, 100_000} { // the second is capped at its hold
		res, err := led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: "r" + string(rune('a'+i)), KeyId: key,
			Model: "demo-claude-cached", AmountMicros: hold, Pool: accountingv1.Pool_POOL_GENERAL})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := led.Commit(ctx, &accountingv1.CommitRequest{ReservationId: res.GetReservationId(), ActualMicros: 106_250,
			UpstreamModel: "mock-claude", Channel: "anthropic-main", Usage: &accountingv1.Usage{InputTokens: 87_000,
				OutputTokens: 1_000, Components: agentTurn(), ServiceTier: "default"}}); err != nil {
			t.Fatal(err)
		}
	}

	entries := decode(t, run(t, env, "ledger", "--account", id))["entries"].([]any)
	capped, full := entries[0].(map[string]any), entries[1].(map[string]any)
	wantComponents := `[{"amount":0.01,"amount_micros":10000,"name":"input","price_per_mtok":5000000,"units":2000},` +
		`{"amount":0.04,"amount_micros":40000,"name":"cache_read","price_per_mtok":500000,"units":80000},` +
		`{"amount":0.03125,"amount_micros":31250,"name":"cache_write","price_per_mtok":6250000,"units":5000},` +
		`{"amount":0.025,"amount_micros":25000,"name":"output","price_per_mtok":25000000,"units":1000}]`
	// A capped charge's components sum to what it charged (the last cut by the
	// 6,250 micro-credits the hold forgave); its priced ones are the full breakdown.
	cappedComponents := strings.Replace(wantComponents, `{"amount":0.025,"amount_micros":25000,`, `{"amount":0.01875,"amount_micros":18750,`, 1)
	if got := jsonOf(t, capped["priced_components"]); got != wantComponents {
		t.Errorf("capped priced_components = %s\nwant %s", got, wantComponents)
	}
	if _, ok := full["priced_components"]; ok {
		t.Errorf("an uncapped charge has priced_components: %v", full)
	}
	for _, c := range []struct {
		e              map[string]any
		amount, capped any
		components     string
	}{{full, "-0.10625", false, wantComponents}, {capped, "-0.1", true, cappedComponents}} {
		if got := jsonOf(t, c.e["components"]); got != c.components {
			t.Errorf("components = %s\nwant %s", got, c.components)
		}
		if c.e["amount"].(json.Number).String() != c.amount || c.e["capped"] != c.capped || c.e["service_tier"] != "default" ||
			c.e["channel"] != "anthropic-main" || c.e["upstream_model"] != "mock-claude" {
			t.Errorf("entry %v", c.e)
		}
	}
	if top := entries[2].(map[string]any); jsonOf(t, top["components"]) != "[]" || top["service_tier"] != "" {
		t.Errorf("a top-up: %v", top)
	}

	usage := decode(t, run(t, env, "usage", "--account", id, "--by", "channel"))
	row := usage["rows"].([]any)[0].(map[string]any)
	want := map[string]string{"channel": "anthropic-main", "upstream_model": "mock-claude", "requests": "2",
		"input_tokens": "174000", "cache_read_tokens": "160000", "cache_write_tokens": "10000", "charged": "0.20625"}
	for k, v := range want {
		if got := fmt.Sprint(row[k]); got != v {
			t.Errorf("usage row %s = %s, want %s", k, got, v)
		}
	}
	total := usage["total"].(map[string]any)
	if jsonOf(t, total["cache_read_tokens"]) != "160000" || jsonOf(t, total["cache_write_tokens"]) != "10000" {
		t.Errorf("usage total %v", total)
	}
	if byModel := decode(t, run(t, env, "usage", "--account", id)); jsonOf(t, byModel["rows"].([]any)[0].(map[string]any)["cache_read_tokens"]) != "160000" {
		t.Errorf("usage by model %v", byModel)
	}

	today := time.Now().UTC().Format(time.DateOnly)
	rec := decode(t, run(t, env, "reconcile", "--from", today, "--to", today))
	wantRows := []any{map[string]any{"day": today, "channel": "anthropic-main", "upstream_model": "mock-claude", "requests": json.Number("2"),
		"components": map[string]any{
			"input":       map[string]any{"units": json.Number("4000"), "amount": json.Number("0.02"), "amount_micros": json.Number("20000")},
			"cache_read":  map[string]any{"units": json.Number("160000"), "amount": json.Number("0.08"), "amount_micros": json.Number("80000")},
			"cache_write": map[string]any{"units": json.Number("10000"), "amount": json.Number("0.0625"), "amount_micros": json.Number("62500")},
			"output":      map[string]any{"units": json.Number("2000"), "amount": json.Number("0.05"), "amount_micros": json.Number("50000")},
		},
		"priced": json.Number("0.2125"), "priced_micros": json.Number("212500"),
		"charged": json.Number("0.20625"), "charged_micros": json.Number("206250")}}
	if !reflect.DeepEqual(rec["rows"], wantRows) {
		t.Errorf("reconcile rows\n got %s\nwant %s", jsonOf(t, rec["rows"]), jsonOf(t, wantRows))
	}
	for _, args := range [][]string{{"reconcile", "--from", today}, {"reconcile", "--from", "2026-13-01", "--to", today}} {
		if r := run(t, env, args...); r.code != 2 || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q", args, r.code, r.stdout)
		}
	}
}
