package tables_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/gateway/accounting/ledger"
)

func TestListAccountsPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	if got, err := f.s.ListAccounts(ctx, ledger.AccountQuery{Limit: 10}); err != nil || len(got) != 0 {
		t.Fatalf("ListAccounts on an empty ledger = %v, %v; want none", got, err)
	}
	// Newest first: the account just created is on the first page. Accounts created in
	// the same instant (the last two) come in descending id order.
	var want []string
	for i := range 5 {
		f.clk.Set(t0.Add(time.Duration(min(i, 3)) * time.Second))
		want = append([]string{f.account(t, "default", 0).ID}, want...)
	}
	if want[0] < want[1] {
		want[0], want[1] = want[1], want[0]
	}
	var got []string
	after := ""
	for page := 0; ; page++ {
		accs, err := f.s.ListAccounts(ctx, ledger.AccountQuery{AfterID: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(accs) == 0 {
			break
		}
		if len(accs) > 2 || page > 3 {
			t.Fatalf("page %d has %d accounts", page, len(accs))
		}
		for _, a := range accs {
			got = append(got, a.ID)
		}
		after = accs[len(accs)-1].ID
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("accounts paged (-want +got):\n%s", diff)
	}
	for _, bad := range []struct {
		after string
		limit int
	}{{"", 0}, {"", 1001}, {"not-an-id", 1}} {
		if _, err := f.s.ListAccounts(ctx, ledger.AccountQuery{AfterID: bad.after, Limit: bad.limit}); ledger.ReasonOf(err) != ledger.ReasonInvalidArgument {
			t.Errorf("ListAccounts(%q, %d) = %v, want invalid argument", bad.after, bad.limit, err)
		}
	}
}

func TestListKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	if _, err := f.s.ListKeys(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("ListKeys(unknown) = %v, want ErrNotFound", err)
	}
	f.tier(t, bulkTier)
	a := f.account(t, "bulk", 0)
	if keys, err := f.s.ListKeys(ctx, a.ID); err != nil || len(keys) != 0 {
		t.Fatalf("ListKeys(no keys) = %v, %v; want an empty list", keys, err)
	}
	b := f.account(t, "default", 1_000_000)
	k1, _ := f.key(t, b.ID, func(nk *ledger.NewKey) { nk.Name = "first" })
	f.clk.Set(t0.Add(time.Second))
	k2, _ := f.key(t, b.ID, func(nk *ledger.NewKey) { nk.Name = "second" })
	f.key(t, a.ID, nil)
	f.mustReserve(t, k2.ID, 700, ledger.PoolGeneral)

	keys, err := f.s.ListKeys(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	k2.HeldToday, k2.HeldMonth = 700, 700
	if diff := cmp.Diff([]ledger.Key{k1, k2}, keys); diff != "" {
		t.Errorf("ListKeys (-want +got):\n%s", diff)
	}
}

func TestUsageEqualsLedgerAfterConcurrentCharges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 12)
	f.tier(t, bulkTier)
	ctx := context.Background()
	a := f.account(t, "bulk", 1_000_000_000)
	other := f.account(t, "bulk", 1_000_000_000)
	k1, _ := f.key(t, a.ID, nil)
	k2, _ := f.key(t, a.ID, nil)
	ko, _ := f.key(t, other.ID, nil)

	empty, err := f.s.Usage(ctx, ledger.UsageQuery{AccountID: a.ID, From: t0, To: t0, By: ledger.ByModel})
	if err != nil || len(empty.Rows) != 0 || empty.Total != (ledger.UsageRow{}) {
		t.Fatalf("Usage with no charges = %+v, %v; want nothing", empty, err)
	}

	days := []time.Time{t0, t0.Add(24 * time.Hour)}
	models := []string{"demo-chat", "demo-claude", "demo-free"}
	keys := []string{k1.ID, k2.ID, ko.ID}
	for _, d := range days {
		f.clk.Set(d)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 15 {
					n := w*15 + i
					r, err := f.s.Reserve(ctx, ledger.ReserveRequest{RequestID: reqID(), KeyID: keys[n%3],
						Model: models[(n/3)%len(models)], Amount: 10_000, Pool: ledger.PoolGeneral})
					if err != nil {
						t.Error(err)
						return
					}
					if n%5 == 0 { // released: counts nothing
						_, err = f.s.Release(ctx, r.ID, "test")
					} else {
						_, err = f.s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: int64(n * 37),
							Usage: ledger.Usage{InputTokens: int64(n), OutputTokens: int64(2 * n)}})
					}
					if err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
	}
	f.checkInvariants(t)

	// What the ledger says, computed from its entries.
	var wantCharged, wantReq, wantIn, wantOut int64
	err = f.pool.QueryRow(ctx, `SELECT -sum(amount), count(*), sum(input_tokens), sum(output_tokens)
		FROM ledger_entries WHERE account_id = $1 AND kind = 'charge'`, a.ID).Scan(&wantCharged, &wantReq, &wantIn, &wantOut)
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.UsageRow{Requests: wantReq, InputTokens: wantIn, OutputTokens: wantOut, Charged: wantCharged}
	acct := f.getAccount(t, a.ID)
	if top := int64(1_000_000_000); top-acct.Balance != wantCharged {
		t.Fatalf("balance %d does not match charges %d", acct.Balance, wantCharged)
	}
	for _, by := range []ledger.UsageGroup{ledger.ByModel, ledger.ByKey, ledger.ByDay} {
		r, err := f.s.Usage(ctx, ledger.UsageQuery{AccountID: a.ID, From: days[0], To: days[1], By: by})
		if err != nil {
			t.Fatal(err)
		}
		if r.Total != want {
			t.Errorf("by %d: total %+v, want %+v", by, r.Total, want)
		}
		var sum ledger.UsageRow
		for _, row := range r.Rows {
			sum.Requests += row.Requests
			sum.Charged += row.Charged
		}
		if sum.Requests != want.Requests || sum.Charged != want.Charged {
			t.Errorf("by %d: rows sum to %+v, want %+v", by, sum, want)
		}
		wantRows := map[ledger.UsageGroup]int{ledger.ByModel: 3, ledger.ByKey: 2, ledger.ByDay: 2}[by]
		if len(r.Rows) != wantRows {
			t.Errorf("by %d: %d rows, want %d: %+v", by, len(r.Rows), wantRows, r.Rows)
		}
	}
	// One day, one key.
	r, err := f.s.Usage(ctx, ledger.UsageQuery{AccountID: a.ID, KeyID: k1.ID, From: days[1], To: days[1], By: ledger.ByDay})
	if err != nil {
		t.Fatal(err)
	}
	var oneDay ledger.UsageRow
	err = f.pool.QueryRow(ctx, `SELECT count(*), -sum(amount) FROM ledger_entries
		WHERE key_id = $1 AND kind = 'charge' AND created_at >= $2`, k1.ID, days[1]).Scan(&oneDay.Requests, &oneDay.Charged)
	if err != nil {
		t.Fatal(err)
	}
	wantDay := []ledger.UsageRow{{Group: days[1].Format(time.DateOnly)}}
	wantDay[0].Requests, wantDay[0].Charged = oneDay.Requests, oneDay.Charged
	if len(r.Rows) != 1 || r.Rows[0].Group != wantDay[0].Group || r.Rows[0].Requests != oneDay.Requests || r.Rows[0].Charged != oneDay.Charged {
		t.Errorf("one key, one day: %+v, want %+v", r.Rows, wantDay)
	}

	for name, q := range map[string]ledger.UsageQuery{
		"unknown account":   {AccountID: "00000000-0000-0000-0000-000000000000", From: t0, To: t0, By: ledger.ByModel},
		"another's key":     {AccountID: a.ID, KeyID: ko.ID, From: t0, To: t0, By: ledger.ByModel},
		"key not an id":     {AccountID: a.ID, KeyID: "x", From: t0, To: t0, By: ledger.ByModel},
		"account not an id": {AccountID: "x", From: t0, To: t0, By: ledger.ByModel},
	} {
		if _, err := f.s.Usage(ctx, q); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := f.s.Usage(ctx, ledger.UsageQuery{AccountID: a.ID, From: days[1], To: days[0], By: ledger.ByModel}); ledger.ReasonOf(err) != ledger.ReasonInvalidArgument {
		t.Errorf("reversed range: %v, want invalid argument", err)
	}
}

func TestLedgerEntriesPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	if _, err := f.s.LedgerEntries(ctx, "00000000-0000-0000-0000-000000000000", 0, 10); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("LedgerEntries(unknown) = %v, want ErrNotFound", err)
	}
	a := f.account(t, "default", 0)
	if got, err := f.s.LedgerEntries(ctx, a.ID, 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("LedgerEntries(no entries) = %v, %v", got, err)
	}
	for i := range 3 {
		if _, err := f.s.TopUp(ctx, a.ID, int64(1_000_000*(i+1)), fmt.Sprint("t", i)); err != nil {
			t.Fatal(err)
		}
	}
	k, _ := f.key(t, a.ID, nil)
	for i := range 4 {
		r := f.mustReserve(t, k.ID, 100_000, ledger.PoolGeneral)
		must(t, errOf(f.s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: int64(1_000 * (i + 1)),
			Usage: ledger.Usage{InputTokens: 10, OutputTokens: 20}})))
	}
	var all []ledger.Entry
	before := int64(0)
	for {
		page, err := f.s.LedgerEntries(ctx, a.ID, before, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
		before = page[len(page)-1].ID
	}
	if len(all) != 7 {
		t.Fatalf("%d entries, want 7", len(all))
	}
	var sum int64
	for i, e := range all {
		sum += e.Amount
		if i > 0 && e.ID >= all[i-1].ID {
			t.Errorf("entries not newest first: %d after %d", e.ID, all[i-1].ID)
		}
	}
	if bal := f.getAccount(t, a.ID).Balance; sum != bal {
		t.Errorf("entries sum to %d, balance %d", sum, bal)
	}
	newest := all[0]
	if newest.Kind != ledger.EntryCharge || newest.Amount != -4_000 || newest.KeyID != k.ID || newest.Model != "demo-chat" ||
		newest.InputTokens != 10 || newest.OutputTokens != 20 || newest.ReservationID == "" {
		t.Errorf("newest entry = %+v", newest)
	}
	if oldest := all[6]; oldest.Kind != ledger.EntryTopUp || oldest.Amount != 1_000_000 || oldest.KeyID != "" {
		t.Errorf("oldest entry = %+v", oldest)
	}
}

// TestListAccountsByLabel: the account list searched by a part of the label, ignoring
// case, and paged within the search (the journal engine reads the list here too).
func TestListAccountsByLabel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	var ids []string
	for i, label := range []string{"Acme research", "beta lab", "ACME billing", "", "100%_acme"} {
		f.clk.Set(t0.Add(time.Duration(i) * time.Second))
		a, err := f.s.CreateAccount(ctx, ledger.NewAccount{Label: label})
		if err != nil || a.Label != label {
			t.Fatalf("CreateAccount(label %q) = %+v, %v", label, a, err)
		}
		ids = append(ids, a.ID)
	}
	a, err := f.s.UpdateAccount(ctx, ledger.AccountUpdate{ID: ids[1], Label: ledger.To("Acme, beta lab")})
	if err != nil || a.Label != "Acme, beta lab" || a.Tier != ledger.DefaultTier {
		t.Fatalf("UpdateAccount = %+v, %v", a, err)
	}
	if a, err := f.s.UpdateAccount(ctx, ledger.AccountUpdate{ID: ids[0]}); err != nil || a.Label != "Acme research" {
		t.Errorf("UpdateAccount without a label = %+v, %v; want the label kept", a, err)
	}
	labels := func(q ledger.AccountQuery) []string {
		t.Helper()
		q.Limit = max(q.Limit, 10)
		accs, err := f.s.ListAccounts(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, a := range accs {
			out = append(out, a.Label)
		}
		return out
	}
	for _, tt := range []struct {
		q    ledger.AccountQuery
		want []string
	}{
		{ledger.AccountQuery{Label: "acme"}, []string{"100%_acme", "ACME billing", "Acme, beta lab", "Acme research"}},
		{ledger.AccountQuery{Label: "%_"}, []string{"100%_acme"}},
		{ledger.AccountQuery{Label: "BETA"}, []string{"Acme, beta lab"}},
		{ledger.AccountQuery{Label: "nobody"}, []string{}},
		{ledger.AccountQuery{Label: "acme", AfterID: ids[2]}, []string{"Acme, beta lab", "Acme research"}},
		{ledger.AccountQuery{}, []string{"100%_acme", "", "ACME billing", "Acme, beta lab", "Acme research"}},
	} {
		if diff := cmp.Diff(tt.want, labels(tt.q)); diff != "" {
			t.Errorf("ListAccounts(%+v) (-want +got):\n%s", tt.q, diff)
		}
	}
	if _, err := f.s.UpdateAccount(ctx, ledger.AccountUpdate{ID: "00000000-0000-0000-0000-000000000000", Label: ledger.To("x")}); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("UpdateAccount of an unknown account: %v, want not found", err)
	}
}
