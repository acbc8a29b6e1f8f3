package tables_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// agentTurn is the agent turn on an Opus-class card: 2k fresh, 80k cache-read
// and 5k cache-written input tokens, 1k output: 106,250 micro-credits.
var agentTurn = []ledger.Component{
	{Name: "input", Units: 2_000, PricePerMTok: 5_000_000, Amount: 10_000},
	{Name: "cache_read", Units: 80_000, PricePerMTok: 500_000, Amount: 40_000},
	{Name: "cache_write", Units: 5_000, PricePerMTok: 6_250_000, Amount: 31_250},
	{Name: "output", Units: 1_000, PricePerMTok: 25_000_000, Amount: 25_000},
}

const agentTurnCost = 106_250

// oneHourWrite is a turn that writes its prompt to the 1-hour cache.
var oneHourWrite = []ledger.Component{
	{Name: "cache_write_1h", Units: 3_000, PricePerMTok: 6_000_000, Amount: 18_000},
	{Name: "output", Units: 10, PricePerMTok: 15_000_000, Amount: 150},
}

// together runs calls at once, so that the owner decides them in one batch when they
// meet, and returns when every one has.
func together(calls ...func()) {
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(c)
	}
	wg.Wait()
}

// Each charge records its components and tier exactly once: committed in one batch
// with others, replayed (with a different breakdown, which changes nothing), and capped
// by its hold (the components stay as priced).
func TestChargeComponentsStoredOnce(t *testing.T) {
	t.Parallel()
	f, batch := newFixture(t, 8), together
	ctx := context.Background()
	f.tier(t, bulkTier)
	a := f.account(t, "bulk", 10_000_000)
	k, _ := f.key(t, a.ID, nil)
	full := f.mustReserve(t, k.ID, 200_000, ledger.PoolGeneral)
	capped := f.mustReserve(t, k.ID, 100_000, ledger.PoolGeneral)
	hour := f.mustReserve(t, k.ID, 50_000, ledger.PoolGeneral)
	plain := f.mustReserve(t, k.ID, 50_000, ledger.PoolGeneral)

	commit := func(id string, actual ledger.Micros, u ledger.Usage, channel string) func() {
		return func() {
			_, err := f.s.Commit(ctx, ledger.CommitRequest{ReservationID: id, Actual: actual, Usage: u,
				UpstreamModel: "up-" + channel, Channel: channel})
			if err != nil {
				t.Errorf("Commit %s: %v", id, err)
			}
		}
	}
	turn := ledger.Usage{InputTokens: 87_000, OutputTokens: 1_000, Components: agentTurn, ServiceTier: "priority"}
	hourly := ledger.Usage{InputTokens: 3_000, OutputTokens: 10, Components: oneHourWrite, ServiceTier: "default"}
	batch(commit(full.ID, agentTurnCost, turn, "ch-a"), commit(capped.ID, agentTurnCost, turn, "ch-a"),
		commit(hour.ID, 18_150, hourly, "ch-b"), commit(plain.ID, 700, ledger.Usage{InputTokens: 5, OutputTokens: 6}, "ch-b"))
	// Replays, in a batch of their own and with another breakdown: nothing changes.
	other := ledger.Usage{InputTokens: 1, Components: []ledger.Component{{Name: "input", Units: 1, PricePerMTok: 1_000_000, Amount: 1}}}
	batch(commit(full.ID, 1, other, "ch-z"), commit(capped.ID, 1, other, "ch-z"), commit(hour.ID, 1, other, "ch-z"))

	f.caughtUp(t)
	var n int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries WHERE kind = 'charge'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("%d charges, want 4", n)
	}
	entries, err := f.s.LedgerEntries(ctx, a.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	byRes := map[string]ledger.Entry{}
	for _, e := range entries {
		byRes[e.ReservationID] = e
	}
	for _, want := range []struct {
		id         string
		amount     ledger.Micros
		components []ledger.Component
		tier       string
		capped     bool
	}{
		{full.ID, -agentTurnCost, agentTurn, "priority", false},
		{capped.ID, -100_000, agentTurn, "priority", true},
		{hour.ID, -18_150, oneHourWrite, "default", false},
		{plain.ID, -700, nil, "", false},
	} {
		e := byRes[want.id]
		if e.Amount != want.amount || e.ServiceTier != want.tier || e.Capped() != want.capped {
			t.Errorf("entry of %s: amount %d, tier %q, capped %v; want %d, %q, %v",
				want.id, e.Amount, e.ServiceTier, e.Capped(), want.amount, want.tier, want.capped)
		}
		if diff := cmp.Diff(want.components, e.Components); diff != "" {
			t.Errorf("components of %s (-want +got):\n%s", want.id, diff)
		}
	}
	if e := byRes[full.ID]; e.Channel != "ch-a" || e.UpstreamModel != "up-ch-a" {
		t.Errorf("channel %q, upstream model %q", e.Channel, e.UpstreamModel)
	}

	day := t0.Truncate(24 * time.Hour)
	r, err := f.s.Usage(ctx, ledger.UsageQuery{AccountID: a.ID, From: day, To: day, By: ledger.ByChannel})
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.UsageReport{
		Rows: []ledger.UsageRow{
			{Group: "ch-a", UpstreamModel: "up-ch-a", Requests: 2, InputTokens: 174_000, OutputTokens: 2_000,
				CacheReadTokens: 160_000, CacheWriteTokens: 10_000, Charged: agentTurnCost + 100_000},
			{Group: "ch-b", UpstreamModel: "up-ch-b", Requests: 2, InputTokens: 3_005, OutputTokens: 16,
				CacheWriteTokens: 3_000, Charged: 18_850},
		},
		Total: ledger.UsageRow{Requests: 4, InputTokens: 177_005, OutputTokens: 2_016, CacheReadTokens: 160_000,
			CacheWriteTokens: 13_000, Charged: agentTurnCost + 100_000 + 18_850},
	}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("usage by channel (-want +got):\n%s", diff)
	}
	f.checkInvariants(t)
}

// Reconciliation sums every account's charges per UTC day, channel and upstream model:
// each component's units and amount as priced, and what was charged (less, where a
// hold capped a charge). Days outside the range count nothing.
func TestReconcile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 8)
	ctx := context.Background()
	f.tier(t, bulkTier)
	type charge struct {
		at      time.Time
		hold    ledger.Micros
		u       ledger.Usage
		channel string
	}
	turn := ledger.Usage{InputTokens: 87_000, OutputTokens: 1_000, Components: agentTurn}
	hourly := ledger.Usage{InputTokens: 3_000, OutputTokens: 10, Components: oneHourWrite}
	next := t0.Add(24 * time.Hour)
	charges := []charge{
		{t0, 200_000, turn, "ch-a"},
		{t0, 100_000, turn, "ch-a"}, // capped: 6,250 forgiven
		{t0, 50_000, hourly, "ch-b"},
		{t0, 50_000, ledger.Usage{InputTokens: 5}, "ch-b"}, // no breakdown: counted, no components
		{next, 200_000, turn, "ch-a"},
		{t0.Add(-24 * time.Hour), 200_000, turn, "ch-a"}, // outside the range
	}
	var wg sync.WaitGroup
	for i, c := range charges {
		// Two accounts: reconciliation is across all of them.
		a := f.account(t, "bulk", 1_000_000)
		k, _ := f.key(t, a.ID, nil)
		f.clk.Set(c.at)
		r := f.mustReserve(t, k.ID, c.hold, ledger.PoolGeneral)
		actual := ledger.PricedAmount(c.u.Components)
		if actual == 0 {
			actual = 300
		}
		wg.Go(func() {
			if _, err := f.s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: actual, Usage: c.u,
				Channel: c.channel, UpstreamModel: fmt.Sprint("up-", c.channel)}); err != nil {
				t.Errorf("commit %d: %v", i, err)
			}
		})
		wg.Wait()
	}
	f.clk.Set(t0)
	rows, err := f.s.Reconcile(ctx, ledger.ReconcileQuery{From: t0.Truncate(24 * time.Hour), To: next.Truncate(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	totals := func(scale int64, cs []ledger.Component) []ledger.ComponentTotal {
		var out []ledger.ComponentTotal
		for _, c := range cs {
			out = append(out, ledger.ComponentTotal{Name: c.Name, Units: scale * c.Units, Amount: scale * c.Amount})
		}
		return out
	}
	want := []ledger.ReconcileRow{
		{Day: "2026-03-14", Channel: "ch-a", UpstreamModel: "up-ch-a", Requests: 2, Components: totals(2, agentTurn),
			Charged: agentTurnCost + 100_000},
		{Day: "2026-03-14", Channel: "ch-b", UpstreamModel: "up-ch-b", Requests: 2, Components: totals(1, oneHourWrite),
			Charged: 18_150 + 300},
		{Day: "2026-03-15", Channel: "ch-a", UpstreamModel: "up-ch-a", Requests: 1, Components: totals(1, agentTurn),
			Charged: agentTurnCost},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("reconciliation (-want +got):\n%s", diff)
	}
	for _, q := range []ledger.ReconcileQuery{{From: next, To: t0}, {From: t0, To: t0.AddDate(0, 0, ledger.MaxReconcileDays)}} {
		_, err := f.s.Reconcile(ctx, q)
		wantReason(t, err, ledger.ReasonInvalidArgument)
	}
	if _, err := f.s.Reconcile(ctx, ledger.ReconcileQuery{From: t0, To: t0.AddDate(0, 0, ledger.MaxReconcileDays-1)}); err != nil {
		t.Errorf("a range of %d days: %v", ledger.MaxReconcileDays, err)
	}
}

// A database with charges from before 0012 migrates with every row valid: the usage
// rollup keeps its totals and gains the split by channel, old charges list without
// components, and a process still calling the old ledger_commit kept charging (until
// 0017 dropped the store engine's functions).
func TestChargeComponentsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := poolAt(t, 10, 4)
	var acct, key string
	err := pool.QueryRow(ctx, `INSERT INTO accounts (tier) VALUES ('default') RETURNING id::text`).Scan(&acct)
	if err == nil {
		_, err = pool.Exec(ctx, `SELECT ledger_top_up($1, 10000000, '', NULL)`, acct)
	}
	if err == nil {
		err = pool.QueryRow(ctx, `INSERT INTO api_keys (account_id, hash) VALUES ($1, sha256('k')) RETURNING id::text`, acct).Scan(&key)
	}
	if err != nil {
		t.Fatal(err)
	}
	charge := func(i int, channel string, when time.Time) {
		t.Helper()
		var id string
		err := pool.QueryRow(ctx, `SELECT o_id::text FROM ledger_reserve($1, $2, 'demo-chat', 1000, 1::smallint, '1 minute', $3)`,
			fmt.Sprint("old-", i), key, when).Scan(&id)
		if err == nil {
			_, err = pool.Exec(ctx, `SELECT ledger_commit($1, 100, 10, 20, NULL, $2, $3, $4)`, id, "up-"+channel, channel, when)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	charge(1, "ch-a", t0)
	charge(2, "ch-b", t0.Add(time.Minute))
	charge(3, "ch-a", t0.Add(2*time.Minute))

	s := tables.New(pool, tables.Options{Now: func() time.Time { return t0 }})
	day := t0.Truncate(24 * time.Hour)
	// The report as version 10 reads it.
	var before ledger.UsageRow
	if err := pool.QueryRow(ctx, `SELECT model, sum(requests), sum(input_tokens), sum(output_tokens), sum(charged)
		FROM usage_daily WHERE account_id = $1 GROUP BY model`, acct).Scan(
		&before.Group, &before.Requests, &before.InputTokens, &before.OutputTokens, &before.Charged); err != nil {
		t.Fatal(err)
	}
	if err := tables.MigrateTo(ctx, pool, 12); err != nil {
		t.Fatal(err)
	}
	after, err := s.Usage(ctx, ledger.UsageQuery{AccountID: acct, From: day, To: day, By: ledger.ByModel})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ledger.UsageReport{Rows: []ledger.UsageRow{before}, Total: ledger.UsageRow{Requests: 3, InputTokens: 30,
		OutputTokens: 60, Charged: 300}}, after); diff != "" || before.Requests != 3 {
		t.Errorf("usage by model across the migration (-before +after):\n%s", diff)
	}
	byChannel, err := s.Usage(ctx, ledger.UsageQuery{AccountID: acct, From: day, To: day, By: ledger.ByChannel})
	if err != nil {
		t.Fatal(err)
	}
	wantRows := []ledger.UsageRow{
		{Group: "ch-a", UpstreamModel: "up-ch-a", Requests: 2, InputTokens: 20, OutputTokens: 40, Charged: 200},
		{Group: "ch-b", UpstreamModel: "up-ch-b", Requests: 1, InputTokens: 10, OutputTokens: 20, Charged: 100},
	}
	if diff := cmp.Diff(wantRows, byChannel.Rows); diff != "" {
		t.Errorf("usage by channel of old charges (-want +got):\n%s", diff)
	}

	charge(4, "ch-b", t0.Add(3*time.Minute)) // the old signature, after the migration
	entries, err := s.LedgerEntries(ctx, acct, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 {
		t.Fatalf("%d entries, want 5 (a top-up and 4 charges)", len(entries))
	}
	for _, e := range entries {
		if e.Components != nil || e.ServiceTier != "" {
			t.Errorf("an old charge has components %v, tier %q", e.Components, e.ServiceTier)
		}
	}
	if err := tablestest.CheckInvariants(ctx, pool); err != nil {
		t.Fatal(err)
	}
}
