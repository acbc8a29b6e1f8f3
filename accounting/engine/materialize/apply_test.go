package materialize_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/engine/materialize"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// t2 is the events' time.
var t2 = time.Date(2031, 5, 10, 10, 0, 0, 0, time.UTC)

const (
	accA = "0a000000-0000-4000-8000-000000000001"
	accB = "0a000000-0000-4000-8000-000000000002"
	keyA = "0b000000-0000-4000-8000-000000000001"
	keyB = "0b000000-0000-4000-8000-000000000002"
	res1 = "0c000000-0000-7000-8000-000000000001"
	res2 = "0c000000-0000-7000-8000-000000000002"
	res3 = "0c000000-0000-7000-8000-000000000003"
	res4 = "0c000000-0000-7000-8000-000000000004"
	res5 = "0c000000-0000-7000-8000-000000000005"
)

var gold = ledger.Tier{Name: "gold", RPMBeforeTopUp: 50, RPMAfterTopUp: 500, InFlightGeneral: 20, InFlightHighCost: 4}

func reserved(id, account, key string, amount ledger.Micros, pool ledger.Pool, at time.Time) machine.Reserved {
	return machine.Reserved{ID: id, RequestID: "req-" + id, AccountID: account, KeyID: key, Model: "m",
		Amount: amount, Pool: pool, At: at, ExpiresAt: at.Add(10 * time.Minute)}
}

// components are a charge's priced parts: 1,500,000 micros, 50 tokens read from cache.
var components = []ledger.Component{
	{Name: "input", Units: 100, PricePerMTok: 5_000_000_000, Amount: 500_000},
	{Name: "cache_read", Units: 50, PricePerMTok: 2_000_000_000, Amount: 100_000},
	{Name: "output", Units: 200, PricePerMTok: 4_500_000_000, Amount: 900_000},
}

// events is a shard's journal: tiers, accounts, top-ups, keys, holds committed,
// released, expired and still held, key changes, a suspension and a video task.
func events() []machine.Event {
	at := func(m int) time.Time { return t2.Add(time.Duration(m) * time.Minute) }
	return []machine.Event{
		machine.TierPut{Tier: gold, At: at(0)},
		machine.AccountCreated{ID: accA, Tier: "gold", Label: "Acme", At: at(0)},
		machine.AccountCreated{ID: accB, Tier: ledger.DefaultTier, Label: "Beta lab", At: at(0)},
		machine.ToppedUp{AccountID: accA, Amount: 10_000_000, IdempotencyKey: "i-1", At: at(1)},
		machine.ToppedUp{AccountID: accB, Amount: 4_000_000, At: at(1)},
		machine.KeyCreated{ID: keyA, AccountID: accA, Name: "a", Prefix: "pa", Hash: hash("a"),
			DailyLimit: ptr[ledger.Micros](5_000_000), AllowedModels: []string{"m", "n"}, At: at(2)},
		machine.KeyCreated{ID: keyB, AccountID: accB, Name: "b", Prefix: "pb", Hash: hash("b"), AdminCreated: true, At: at(2)},
		reserved(res1, accA, keyA, 2_000_000, ledger.PoolHighCost, at(3)),
		machine.Committed{ReservationID: res1, Actual: 1_500_000, Charged: 1_500_000, UpstreamModel: "up", Channel: "ch",
			Usage: ledger.Usage{InputTokens: 100, OutputTokens: 200, Units: map[string]int64{"images": 2},
				Components: components, ServiceTier: "priority"}, At: at(4)},
		reserved(res2, accB, keyB, 1_000_000, ledger.PoolGeneral, at(5)),
		machine.Released{ReservationID: res2, State: ledger.StateReleased, Reason: "cancel", At: at(6)},
		reserved(res3, accA, keyA, 3_000_000, ledger.PoolGeneral, at(7)),
		machine.Released{ReservationID: res3, State: ledger.StateExpired, Reason: "expired", At: at(17)},
		reserved(res4, accA, keyA, 1_000_000, ledger.PoolGeneral, at(18)),
		machine.Renewed{ReservationID: res4, ExpiresAt: at(40), At: at(19)},
		machine.KeyChanged{KeyID: keyA, Name: "renamed", AllowedModels: []string{"m"}, DailyLimit: ptr[ledger.Micros](5_000_000),
			Disabled: true, At: at(20)},
		machine.KeyChanged{KeyID: keyA, Name: "renamed", AllowedModels: []string{"m"}, DailyLimit: ptr[ledger.Micros](5_000_000),
			RevokedAt: ptr(at(21)), At: at(21)},
		machine.AccountSuspended{AccountID: accB, Suspended: true, At: at(22)},
		machine.AccountLabeled{AccountID: accA, Label: "Acme research", At: at(22)},
		machine.VideoTaskRecorded{Task: ledger.VideoTask{TaskID: "vt-1", AccountID: accB, KeyID: keyB, AdminCreatedKey: true,
			Model: "video", CreatedAt: at(23), Origin: ledger.TaskOrigin{Channel: "vc", UpstreamTaskID: "up-1"}}},
		reserved(res5, accB, keyB, 500_000, ledger.PoolGeneral, at(24)),
		machine.Committed{ReservationID: res5, Actual: 800_000, Charged: 500_000, UpstreamModel: "up", Channel: "ch", At: at(25)},
		machine.ToppedUp{AccountID: accA, Amount: 1_000_000, IdempotencyKey: "i-2", At: at(26)},
		machine.Forgotten{Before: at(0), At: at(27)},
	}
}

func seqsFrom(first int64, n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = first + int64(i)
	}
	return s
}

// applyIn materializes evs (seqs 1…) in calls of the given sizes, cycled.
func applyIn(t *testing.T, m *materialize.Materializer, evs []machine.Event, sizes ...int) {
	t.Helper()
	seqs := seqsFrom(1, len(evs))
	for i, c := 0, 0; i < len(evs); c++ {
		n := min(sizes[c%len(sizes)], len(evs)-i)
		if err := m.Apply(context.Background(), seqs[i:i+n], evs[i:i+n]); err != nil {
			t.Fatal(err)
		}
		i += n
	}
}

func newDB(t *testing.T) (*pgxpool.Pool, *tables.Store) {
	pool := tablestest.NewPool(t, tablestest.NewDB(t), 4)
	clk := &clock{t: t2.Add(30 * time.Minute)}
	return pool, tables.New(pool, tables.Options{Now: clk.Now})
}

// account is the account id as the tables' reports list it.
func account(t *testing.T, s *tables.Store, id string) ledger.Account {
	t.Helper()
	for _, a := range must(s.ListAccounts(context.Background(), ledger.AccountQuery{Limit: tables.MaxPage}))(t) {
		if a.ID == id {
			return a
		}
	}
	t.Fatalf("account %s is not in the tables", id)
	return ledger.Account{}
}

// key is the key id as the tables' reports list it, with its spend.
func key(t *testing.T, pool *pgxpool.Pool, s *tables.Store, id string) ledger.Key {
	t.Helper()
	var acct string
	if err := pool.QueryRow(context.Background(), `SELECT account_id::text FROM api_keys WHERE id = $1`, id).Scan(&acct); err != nil {
		t.Fatalf("key %s: %v", id, err)
	}
	for _, k := range must(s.ListKeys(context.Background(), acct))(t) {
		if k.ID == id {
			return k
		}
	}
	t.Fatalf("key %s is not listed with its account", id)
	return ledger.Key{}
}

func TestApplyWritesWhatTheStoreReads(t *testing.T) {
	ctx := context.Background()
	pool, s := newDB(t)
	m := materialize.New(pool, 0, machine.Snapshot{}, 0)
	applyIn(t, m, events(), 3, 1, 5)

	a := account(t, s, accA)
	wantA := ledger.Account{ID: accA, Tier: "gold", Label: "Acme research", Balance: 9_500_000, Reserved: 1_000_000, ToppedUp: true, InFlight: 1, CreatedAt: t2}
	if a != wantA {
		t.Errorf("account A %+v, want %+v", a, wantA)
	}
	b := account(t, s, accB)
	wantB := ledger.Account{ID: accB, Tier: "default", Label: "Beta lab", Balance: 3_500_000, Suspended: true, ToppedUp: true, CreatedAt: t2}
	if b != wantB {
		t.Errorf("account B %+v, want %+v", b, wantB)
	}
	ka := key(t, pool, s, keyA)
	wantKA := ledger.Key{ID: keyA, AccountID: accA, Name: "renamed", Prefix: "pa", AllowedModels: []string{"m"},
		DailyLimit: ptr[ledger.Micros](5_000_000), Revoked: true, CreatedAt: t2.Add(2 * time.Minute),
		SpentToday: 1_500_000, HeldToday: 1_000_000, SpentMonth: 1_500_000, HeldMonth: 1_000_000}
	if !reflect.DeepEqual(ka, wantKA) {
		t.Errorf("key A %+v, want %+v", ka, wantKA)
	}
	keys := must(s.ListKeys(ctx, accB))(t)
	if len(keys) != 1 || keys[0].SpentToday != 500_000 || keys[0].HeldMonth != 0 || !keys[0].AdminCreated {
		t.Errorf("keys of B %+v", keys)
	}

	entries := must(s.LedgerEntries(ctx, accA, 0, 10))(t)
	if len(entries) != 3 || entries[0].Kind != ledger.EntryTopUp || entries[0].Amount != 1_000_000 ||
		entries[2].Kind != ledger.EntryTopUp || entries[2].Amount != 10_000_000 {
		t.Fatalf("entries of A %+v", entries)
	}
	charge := entries[1]
	wantCharge := ledger.Entry{ID: charge.ID, Kind: ledger.EntryCharge, Amount: -1_500_000, CreatedAt: t2.Add(4 * time.Minute),
		ReservationID: res1, KeyID: keyA, Model: "m", InputTokens: 100, OutputTokens: 200, Channel: "ch",
		UpstreamModel: "up", Components: components, ServiceTier: "priority"}
	if !reflect.DeepEqual(charge, wantCharge) {
		t.Errorf("charge %+v, want %+v", charge, wantCharge)
	}
	var units string
	if err := pool.QueryRow(ctx, `SELECT units::text FROM ledger_entries WHERE reservation_id = $1`, res1).Scan(&units); err != nil || units != `{"images": 2}` {
		t.Errorf("charge units %s (%v)", units, err)
	}

	usage := must(s.Usage(ctx, ledger.UsageQuery{AccountID: accA, From: t2, To: t2, By: ledger.ByModel}))(t)
	wantUsage := ledger.UsageRow{Group: "m", Requests: 1, InputTokens: 100, OutputTokens: 200, CacheReadTokens: 50, Charged: 1_500_000}
	if len(usage.Rows) != 1 || usage.Rows[0] != wantUsage {
		t.Errorf("usage of A %+v, want %+v", usage.Rows, wantUsage)
	}
	rec := must(s.Reconcile(ctx, ledger.ReconcileQuery{From: t2, To: t2}))(t)
	if len(rec) != 1 || rec[0].Requests != 2 || rec[0].Charged != 2_000_000 || rec[0].Channel != "ch" || len(rec[0].Components) != 3 {
		t.Errorf("reconciliation %+v", rec)
	}
	var v ledger.VideoTask
	if err := pool.QueryRow(ctx, `SELECT account_id::text, upstream_task_id, created_at FROM video_tasks WHERE task_id = 'vt-1'`).
		Scan(&v.AccountID, &v.Origin.UpstreamTaskID, &v.CreatedAt); err != nil {
		t.Fatal(err)
	}
	if v.AccountID != accB || v.Origin.UpstreamTaskID != "up-1" || !v.CreatedAt.Equal(t2.Add(23*time.Minute)) {
		t.Errorf("video task %+v", v)
	}
	var tier ledger.Tier
	if err := pool.QueryRow(ctx, `SELECT name, rpm_before_topup, rpm_after_topup, in_flight_general, in_flight_high_cost
		FROM tiers WHERE name = 'gold'`).Scan(&tier.Name, &tier.RPMBeforeTopUp, &tier.RPMAfterTopUp,
		&tier.InFlightGeneral, &tier.InFlightHighCost); err != nil || tier != gold {
		t.Errorf("tier gold %+v (%v)", tier, err)
	}
	if seq := must(m.Seq(ctx))(t); seq != int64(len(events())) {
		t.Errorf("stored seq %d, want %d", seq, len(events()))
	}
	checkNoReservationRows(t, pool)
	if err := tablestest.CheckInvariantsOf(ctx, pool, events()); err != nil {
		t.Error(err)
	}
}

// checkNoReservationRows checks that the materializer wrote no reservations row
// (migration 0023): a hold is the owner's and the journal's, its settlement its charge
// entry and the counters, which CheckInvariantsOf compares with the events' holds.
func checkNoReservationRows(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM reservations) + (SELECT count(*) FROM reservations_archive)`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d reservations rows, want none", n)
	}
}

// TestApplyOnceWhateverTheCalls materializes one journal in one call, in calls of
// every size, again, and from a restart in the middle: the tables are the same.
func TestApplyOnceWhateverTheCalls(t *testing.T) {
	ctx := context.Background()
	evs := events()
	pool, _ := newDB(t)
	applyIn(t, materialize.New(pool, 0, machine.Snapshot{}, 0), evs, len(evs))
	want := dump(t, pool)
	if n := strings.Count(want[strings.Index(want, "ledger_entries:"):strings.Index(want, "usage_daily:")], "\n"); n != 6 {
		t.Fatalf("%d ledger entries in one call, want 5:\n%s", n-1, want)
	}

	for _, sizes := range [][]int{{1}, {2, 7}, {4}} {
		pool, _ := newDB(t)
		m := materialize.New(pool, 0, machine.Snapshot{}, 0)
		applyIn(t, m, evs, sizes...)
		if got := dump(t, pool); got != want {
			t.Errorf("in calls of %v:\n%s\nin one:\n%s", sizes, got, want)
		}
		// Again, by the same Materializer and by a new one: nothing changes.
		applyIn(t, m, evs, len(evs))
		applyIn(t, materialize.New(pool, 0, machine.Snapshot{}, 0), evs, 5)
		if got := dump(t, pool); got != want {
			t.Errorf("in calls of %v then again:\n%s\nin one:\n%s", sizes, got, want)
		}
	}

	// A restart: the first Materializer wrote up to a hold, the second starts from the
	// beginning of the journal, only folds what was written, and writes its commit.
	pool, _ = newDB(t)
	first := materialize.New(pool, 0, machine.Snapshot{}, 0)
	if err := first.Apply(ctx, seqsFrom(1, 8), evs[:8]); err != nil {
		t.Fatal(err)
	}
	applyIn(t, materialize.New(pool, 0, machine.Snapshot{}, 0), evs, 6)
	if got := dump(t, pool); got != want {
		t.Errorf("after a restart:\n%s\nin one:\n%s", got, want)
	}
}

// dump is the derived tables as text.
func dump(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var out string
	for _, table := range []string{"tiers", "accounts", "api_keys", "ledger_entries", "usage_daily", "key_spend",
		"video_tasks", "ledger_materialized"} {
		var rows string
		err := pool.QueryRow(context.Background(),
			`SELECT coalesce(string_agg(r::text, E'\n' ORDER BY r::text), '') FROM `+table+` r`).Scan(&rows)
		if err != nil {
			t.Fatal(err)
		}
		out += table + ":\n" + rows + "\n"
	}
	return out
}

func TestApplyRefusesWhatItCannotWrite(t *testing.T) {
	ctx := context.Background()
	pool, _ := newDB(t)
	m := materialize.New(pool, 0, machine.Snapshot{}, 0)
	evs := events()
	for _, c := range []struct {
		name   string
		seqs   []int64
		events []machine.Event
	}{
		{"seqs and events differ in number", []int64{1, 2}, evs[:1]},
		{"seqs not increasing", []int64{2, 1}, evs[:2]},
		{"commit of a reservation not held", []int64{1}, []machine.Event{evs[8]}},
		{"an account of an unknown tier", []int64{1}, []machine.Event{evs[1]}},
	} {
		if err := m.Apply(ctx, c.seqs, c.events); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if seq := must(m.Seq(ctx))(t); seq != 0 {
		t.Errorf("stored seq %d after refusals", seq)
	}
	// A failed call wrote and folded nothing: the journal still materializes whole.
	applyIn(t, m, evs, 4)
	if seq := must(m.Seq(ctx))(t); seq != int64(len(evs)) {
		t.Errorf("stored seq %d, want %d", seq, len(evs))
	}
}
