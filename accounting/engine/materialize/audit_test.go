package materialize_test

import (
	"context"
	"testing"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/engine/materialize"
	"github.com/llmgw/gateway/accounting/ledger"
)

// TestAuditWrittenOnceFromTheJournal: an Audited event becomes one audit_log row, at
// the event's time, with the change it follows; the same events applied again, by the
// same Materializer or a new one, write no second row.
func TestAuditWrittenOnceFromTheJournal(t *testing.T) {
	ctx := context.Background()
	pool, s := newDB(t)
	evs := []machine.Event{
		machine.AccountCreated{ID: accA, Tier: "default", At: t2},
		machine.Audited{Actor: "admin-token", Via: "gatewayctl", Action: "account.create", Target: accA, AccountID: accA,
			After: []byte(`{"id":"` + accA + `"}`), At: t2},
		machine.ToppedUp{AccountID: accA, Amount: 5_000_000, At: t2},
		machine.Audited{Actor: "bo@example.com", Via: "console", Action: "account.topup", Target: accA, AccountID: accA,
			Before: []byte(`{"balance_micros":"0"}`), After: []byte(`{"balance_micros":"5000000"}`), At: t2},
	}
	m := materialize.New(pool, 0, machine.Snapshot{}, 0)
	applyIn(t, m, evs, 1)
	applyIn(t, m, evs, len(evs))
	applyIn(t, materialize.New(pool, 0, machine.Snapshot{}, 0), evs, 3)

	got := must(s.ListAudit(ctx, ledger.AuditQuery{AccountID: accA, Limit: 10}))(t)
	if len(got) != 2 {
		t.Fatalf("audit rows: %+v", got)
	}
	top := got[0]
	if top.Actor != "bo@example.com" || top.Via != "console" || top.Action != "account.topup" || top.Target != accA ||
		!top.At.Equal(t2) || string(top.Before) != `{"balance_micros": "0"}` || string(top.After) != `{"balance_micros": "5000000"}` {
		t.Errorf("top-up entry %+v before %s after %s", top, top.Before, top.After)
	}
	if got[1].Action != "account.create" || got[1].Before != nil {
		t.Errorf("create entry %+v", got[1])
	}
}
