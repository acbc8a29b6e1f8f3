package machine

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// alerts are the Alerted events of evs, as "type window percent" (budgets) or "type".
func alerts(evs []Event) []string {
	var out []string
	for _, e := range evs {
		a, ok := e.(Alerted)
		if !ok {
			continue
		}
		if a.Type == AlertBudgetThreshold {
			who := "key"
			if a.ProjectID != "" {
				who = "project"
			}
			out = append(out, fmt.Sprintf("%s %s %s %d", a.Type, who, a.Window, a.Percent))
		} else {
			out = append(out, a.Type)
		}
	}
	return out
}

// commitOf reserves amount on k and commits all of it, returning the commit's alerts.
func (h *harness) commitOf(k string, amount ledger.Micros) []string {
	h.t.Helper()
	r := h.mustReserve(k, amount, ledger.PoolGeneral)
	_, evs := h.do(Commit{Request: ledger.CommitRequest{ReservationID: r.ID, Actual: amount}, At: h.now})
	return alerts(evs)
}

func TestBudgetThresholdsFireOncePerWindow(t *testing.T) {
	h := newHarness(t)
	acct := h.account("enterprise", 1_000_000)
	k, _ := h.key(acct, func(nk *ledger.NewKey) { nk.DailyLimit = ptr[ledger.Micros](1000) })
	steps := []struct {
		name   string
		amount ledger.Micros
		want   []string
	}{
		{"below half", 499, nil},
		{"half", 1, []string{"budget.threshold key day 50"}},
		{"past 80 and 95 at once", 460, []string{"budget.threshold key day 80", "budget.threshold key day 95"}},
		{"still 95", 10, nil},
		{"the limit", 30, []string{"budget.threshold key day 100"}},
	}
	for _, s := range steps {
		if got := h.commitOf(k, s.amount); !slices.Equal(got, s.want) {
			t.Errorf("%s: alerts %q, want %q", s.name, got, s.want)
		}
	}
	// A refused request reaches nothing.
	if _, err := h.reserve(k, 1, ledger.PoolGeneral); ledger.ReasonOf(err) != ledger.ReasonKeyLimitReached {
		t.Fatalf("over the limit: %v", err)
	}
	// A new window arms every threshold again.
	h.now = h.now.Add(24 * time.Hour)
	if got := h.commitOf(k, 800); !slices.Equal(got, []string{"budget.threshold key day 50", "budget.threshold key day 80"}) {
		t.Errorf("the next day: %q", got)
	}
	// A raised limit arms again the thresholds the spend is now below; a lowered one
	// fires at the next commit, not at the change.
	_, evs := h.do(UpdateKey{Update: ledger.KeyUpdate{ID: k, DailyLimit: ledger.To(ptr[ledger.Micros](2000))}, At: h.now})
	if got := alerts(evs); got != nil {
		t.Errorf("raising the limit alerted %q", got)
	}
	if got := h.commitOf(k, 200); !slices.Equal(got, []string{"budget.threshold key day 50"}) {
		t.Errorf("after raising the limit: %q", got)
	}
	h.must(UpdateKey{Update: ledger.KeyUpdate{ID: k, DailyLimit: ledger.To(ptr[ledger.Micros](1040))}, At: h.now})
	if got := h.commitOf(k, 1); !slices.Equal(got, []string{"budget.threshold key day 80", "budget.threshold key day 95"}) {
		t.Errorf("after lowering the limit: %q", got)
	}
}

func TestBudgetThresholdAlertCarriesItsWindow(t *testing.T) {
	h := newHarness(t)
	acct := h.account("enterprise", 1_000_000)
	k, _ := h.key(acct, func(nk *ledger.NewKey) { nk.MonthlyLimit = ptr[ledger.Micros](10_000) })
	r := h.mustReserve(k, 6000, ledger.PoolGeneral)
	h.now = h.now.Add(time.Minute)
	_, evs := h.do(Commit{Request: ledger.CommitRequest{ReservationID: r.ID, Actual: 5500}, At: h.now})
	want := Alerted{Type: AlertBudgetThreshold, AccountID: acct, KeyID: k, Window: WindowMonth,
		Start: monthStart(t0), Percent: 50, Limit: 10_000, Spent: 5500, At: h.now}
	if len(evs) != 2 {
		t.Fatalf("events %v, want Committed and one alert", evs)
	}
	got := evs[1].(Alerted)
	if got.ID == "" || len(got.ID) != len("evt_")+32 {
		t.Errorf("alert id %q", got.ID)
	}
	got.ID = ""
	if got != want {
		t.Errorf("alert %+v, want %+v", got, want)
	}
}

func TestConcurrentCommitsAtAThresholdFireOnce(t *testing.T) {
	h := newHarness(t)
	acct := h.account("enterprise", 1_000_000)
	k, _ := h.key(acct, func(nk *ledger.NewKey) { nk.DailyLimit = ptr[ledger.Micros](1000) })
	var ids []string
	for range 8 {
		ids = append(ids, h.mustReserve(k, 100, ledger.PoolGeneral).ID)
	}
	// One batch: every commit at the same instant, as the decide loop takes them.
	var got []string
	for _, id := range ids {
		_, evs := h.do(Commit{Request: ledger.CommitRequest{ReservationID: id, Actual: 100}, At: h.now})
		got = append(got, alerts(evs)...)
	}
	if want := []string{"budget.threshold key day 50", "budget.threshold key day 80"}; !slices.Equal(got, want) {
		t.Errorf("alerts %q, want %q", got, want)
	}
}

func TestProjectBudgetThresholds(t *testing.T) {
	h := newHarness(t)
	_, k, ps := h.chain(2, func(level int, np *ledger.NewProject) {
		if level == 1 {
			np.Limit = ptr[ledger.Micros](1000)
		} else {
			np.MonthlyLimit = ptr[ledger.Micros](400)
		}
	})
	got := h.commitOf(k, 400)
	want := []string{"budget.threshold project month 50", "budget.threshold project month 80",
		"budget.threshold project month 95", "budget.threshold project month 100"}
	if !slices.Equal(got, want) {
		t.Errorf("the child's month: %q, want %q", got, want)
	}
	h.must(UpdateProject{Update: ledger.ProjectUpdate{ID: ps[1], MonthlyLimit: ledger.To[*ledger.Micros](nil)}, At: h.now})
	if got := h.commitOf(k, 100); !slices.Equal(got, []string{"budget.threshold project lifetime 50"}) {
		t.Errorf("the parent's lifetime: %q", got)
	}
	// Replayed from a snapshot, what fired stays fired.
	h.s = Restore(h.s.Snapshot())
	h.replica = Restore(h.replica.Snapshot())
	if got := h.commitOf(k, 10); got != nil {
		t.Errorf("after a restore: %q", got)
	}
}

func TestBalanceLow(t *testing.T) {
	h := newHarness(t)
	acct := h.account("enterprise", 1000)
	k, _ := h.key(acct, nil)
	low := func(x ledger.Micros) []string {
		_, evs := h.do(UpdateAccount{Update: ledger.AccountUpdate{ID: acct, LowBalance: ledger.To(ptr(x))}, At: h.now})
		return alerts(evs)
	}
	if got := low(500); got != nil {
		t.Errorf("a threshold below the balance alerted %q", got)
	}
	if a := h.getAccount(acct); a.LowBalance == nil || *a.LowBalance != 500 {
		t.Errorf("low balance %v", a.LowBalance)
	}
	reserve := func(amount ledger.Micros) (string, []string) {
		id := h.id(3)
		ans, evs := h.do(Reserve{ID: id, Request: ledger.ReserveRequest{RequestID: "req-" + id, KeyID: k, Model: "m",
			Amount: amount, Pool: ledger.PoolGeneral}, At: h.now})
		if ans.Err != nil {
			return "", []string{ans.Err.Error()}
		}
		return id, alerts(evs)
	}
	if _, got := reserve(400); got != nil {
		t.Errorf("600 available: %q", got)
	}
	// Holds count: available credits are the balance less what is held.
	r2, got := reserve(200)
	if !slices.Equal(got, []string{AlertBalanceLow}) {
		t.Errorf("400 available: %q", got)
	}
	if _, got := reserve(100); got != nil {
		t.Errorf("fired again: %q", got)
	}
	// A refused request alerts nothing.
	if _, got := reserve(10_000); len(got) != 1 || got[0] == AlertBalanceLow {
		t.Errorf("refused: %q", got)
	}
	// A release is no top-up: still fired.
	h.must(Release{ReservationID: r2, At: h.now})
	if _, got := reserve(150); got != nil {
		t.Errorf("after a release: %q", got)
	}
	// A top-up that leaves it below does not arm it; one that lifts it above does.
	h.must(TopUp{AccountID: acct, Amount: 100, At: h.now}) // 1100 − 650 held = 450
	if _, got := reserve(1); got != nil {
		t.Errorf("after a small top-up: %q", got)
	}
	h.must(TopUp{AccountID: acct, Amount: 1000, At: h.now}) // 2100 − 651 held = 1449
	if _, got := reserve(1000); !slices.Equal(got, []string{AlertBalanceLow}) {
		t.Errorf("after a top-up above: %q", got)
	}
	// A threshold set above what is available alerts at once; clearing it stops alerts.
	h.must(TopUp{AccountID: acct, Amount: 1000, At: h.now})
	if got := low(5000); !slices.Equal(got, []string{AlertBalanceLow}) {
		t.Errorf("a threshold above the available credits: %q", got)
	}
	_, evs := h.do(UpdateAccount{Update: ledger.AccountUpdate{ID: acct, LowBalance: ledger.To[*ledger.Micros](nil)}, At: h.now})
	if len(evs) != 1 || alerts(evs) != nil || h.getAccount(acct).LowBalance != nil {
		t.Errorf("clearing: %v", evs)
	}
	if ans, _ := h.do(UpdateAccount{Update: ledger.AccountUpdate{ID: acct, LowBalance: ledger.To(ptr[ledger.Micros](-1))}}); ledger.ReasonOf(ans.Err) != ledger.ReasonInvalidArgument {
		t.Errorf("a negative threshold: %v", ans.Err)
	}
}

func TestOperatorAlerts(t *testing.T) {
	h := newHarness(t)
	acct := h.account("", 0)
	k, _ := h.key(acct, nil)
	steps := []struct {
		cmd  Command
		want []string
	}{
		{SetAccountSuspended{AccountID: acct, Suspended: true, At: h.now}, []string{AlertAccountSuspended}},
		{SetAccountSuspended{AccountID: acct, Suspended: true, At: h.now}, nil},
		{SetAccountSuspended{AccountID: acct, Suspended: false, At: h.now}, []string{AlertAccountUnsuspended}},
		{SetAccountSuspended{AccountID: acct, Suspended: true, At: h.now}, []string{AlertAccountSuspended}},
		{RevokeKey{KeyID: k, At: h.now}, []string{AlertKeyRevoked}},
		{RevokeKey{KeyID: k, At: h.now}, nil},
		{SetKeyDisabled{KeyID: k, Disabled: true, At: h.now}, nil},
	}
	ids := map[string]bool{}
	for i, s := range steps {
		_, evs := h.do(s.cmd)
		if got := alerts(evs); !slices.Equal(got, s.want) {
			t.Errorf("step %d %T: %q, want %q", i, s.cmd, got, s.want)
		}
		for _, e := range evs {
			if a, ok := e.(Alerted); ok {
				if ids[a.ID] {
					t.Errorf("step %d: id %s again", i, a.ID)
				}
				ids[a.ID] = true
			}
		}
	}
}
