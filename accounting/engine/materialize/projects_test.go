package materialize_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/engine/materialize"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

const (
	projTop   = "0d000000-0000-4000-8000-000000000001"
	projChild = "0d000000-0000-4000-8000-000000000002"
	projOther = "0d000000-0000-4000-8000-000000000003"
	keyC      = "0b000000-0000-4000-8000-000000000003"
	res6      = "0c000000-0000-7000-8000-000000000006"
	res7      = "0c000000-0000-7000-8000-000000000007"
	res8      = "0c000000-0000-7000-8000-000000000008"
)

// projectEvents: a tree top > child and a project deleted at once; key A in child
// with its own rates, key C in none. Key A's first request is admitted in child and
// committed after the key moved to top: it stays child's. Key A's second is top's;
// key C's is in no project.
func projectEvents() []machine.Event {
	at := func(m int) time.Time { return t2.Add(time.Duration(m) * time.Minute) }
	commit := func(id string, charged ledger.Micros, m int) machine.Committed {
		return machine.Committed{ReservationID: id, Actual: charged, Charged: charged,
			Usage: ledger.Usage{InputTokens: 10, OutputTokens: 1}, At: at(m)}
	}
	return []machine.Event{
		machine.AccountCreated{ID: accA, Tier: ledger.DefaultTier, At: at(0)},
		machine.ToppedUp{AccountID: accA, Amount: 10_000_000, At: at(0)},
		machine.ProjectCreated{ID: projTop, AccountID: accA, Name: "top", Limit: ptr[ledger.Micros](9_000_000), At: at(1)},
		machine.ProjectCreated{ID: projChild, AccountID: accA, ParentID: projTop, Name: "child", RPM: ptr[int64](5),
			Models: []string{"m"}, At: at(1)},
		machine.ProjectCreated{ID: projOther, AccountID: accA, Name: "other", At: at(1)},
		machine.KeyCreated{ID: keyA, AccountID: accA, Name: "a", Prefix: "pa", Hash: hash("a"), At: at(2)},
		machine.KeyPlaced{KeyID: keyA, ProjectID: projChild, RPM: ptr[int64](3), TPM: ptr[int64](300), At: at(2)},
		machine.KeyCreated{ID: keyC, AccountID: accA, Name: "c", Prefix: "pc", Hash: hash("c"), At: at(2)},
		machine.ProjectChanged{ProjectID: projChild, Name: "kid", DailyLimit: ptr[ledger.Micros](1_000_000), At: at(3)},
		machine.ProjectDeleted{ProjectID: projOther, At: at(3)},
		reserved(res6, accA, keyA, 500_000, ledger.PoolGeneral, at(4)),
		machine.KeyPlaced{KeyID: keyA, ProjectID: projTop, At: at(5)},
		commit(res6, 400_000, 6),
		reserved(res7, accA, keyA, 200_000, ledger.PoolGeneral, at(7)),
		commit(res7, 200_000, 8),
		reserved(res8, accA, keyC, 100_000, ledger.PoolGeneral, at(9)),
		commit(res8, 50_000, 10),
	}
}

// TestProjectsMaterialized: the projects, the keys' placement and each charge's
// project as admitted, in calls of any size, read back through the store's reports.
func TestProjectsMaterialized(t *testing.T) {
	for _, sizes := range [][]int{{1}, {3, 2}, {100}} {
		ctx := context.Background()
		pool, s := newDB(t)
		applyIn(t, materialize.New(pool, 0, machine.Snapshot{}, 0), projectEvents(), sizes...)

		type row struct {
			name              string
			parent            *string
			daily, total, rpm *int64
			models            []string
			deleted           bool
		}
		got := map[string]row{}
		rows, err := pool.Query(ctx, `SELECT id::text, name, parent_id::text, daily_limit, total_limit, rpm, models,
			deleted_at IS NOT NULL FROM projects`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			var r row
			if err := rows.Scan(&id, &r.name, &r.parent, &r.daily, &r.total, &r.rpm, &r.models, &r.deleted); err != nil {
				t.Fatal(err)
			}
			got[id] = r
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if r := got[projTop]; r.name != "top" || r.parent != nil || *r.total != 9_000_000 || r.models != nil || r.deleted {
			t.Errorf("%v: top %+v", sizes, r)
		}
		// ProjectChanged is the whole mutable state: the rpm and models went with it.
		if r := got[projChild]; r.name != "kid" || *r.parent != projTop || *r.daily != 1_000_000 || r.rpm != nil || r.models != nil {
			t.Errorf("%v: child %+v", sizes, r)
		}
		if r := got[projOther]; !r.deleted || len(got) != 3 {
			t.Errorf("%v: other %+v of %d", sizes, r, len(got))
		}

		keys := must(s.ListKeys(ctx, accA))(t)
		if len(keys) != 2 || keys[0].ProjectID != projTop || keys[0].RPM != nil || keys[0].TPM != nil ||
			keys[1].ProjectID != "" {
			t.Errorf("%v: keys %+v", sizes, keys)
		}

		usage := func(project string) ledger.UsageReport {
			return must(s.Usage(ctx, ledger.UsageQuery{AccountID: accA, ProjectID: project, From: t2, To: t2, By: ledger.ByProject}))(t)
		}
		all := usage("")
		want := []ledger.UsageRow{
			{Group: "", Requests: 1, InputTokens: 10, OutputTokens: 1, Charged: 50_000},
			{Group: projTop, Requests: 1, InputTokens: 10, OutputTokens: 1, Charged: 200_000},
			{Group: projChild, Requests: 1, InputTokens: 10, OutputTokens: 1, Charged: 400_000},
		}
		if len(all.Rows) != 3 || all.Rows[0] != want[0] || all.Rows[1] != want[1] || all.Rows[2] != want[2] ||
			all.Total.Charged != 650_000 {
			t.Errorf("%v: by project %+v, want %+v", sizes, all, want)
		}
		if top := usage(projTop); len(top.Rows) != 2 || top.Total.Charged != 600_000 || top.Total.Requests != 2 {
			t.Errorf("%v: top and its descendants %+v", sizes, top)
		}
		if child := usage(projChild); len(child.Rows) != 1 || child.Total.Charged != 400_000 {
			t.Errorf("%v: child %+v", sizes, child)
		}
		if other := usage(projOther); len(other.Rows) != 0 {
			t.Errorf("%v: deleted project %+v", sizes, other)
		}
		for _, bad := range []string{"nope", keyA} {
			if _, err := s.Usage(ctx, ledger.UsageQuery{AccountID: accA, ProjectID: bad, From: t2, To: t2, By: ledger.ByModel}); err != ledger.ErrNotFound {
				t.Errorf("usage of project %s: %v", bad, err)
			}
		}
		// Key A's charges of one day in two projects are two rows of the rollup.
		if err := tablestest.CheckInvariantsOf(ctx, pool, projectEvents()); err != nil {
			t.Errorf("%v: %v", sizes, err)
		}
	}
}

// TestProjectsFromASnapshot: a materializer started from a snapshot knows which keys
// are in which project and where the held reservations were admitted.
func TestProjectsFromASnapshot(t *testing.T) {
	ctx := context.Background()
	pool, s := newDB(t)
	evs := projectEvents()
	// The first 11 events (up to res6 held) are written by one materializer; a second
	// starts from the machine's snapshot after them and writes the rest.
	applyIn(t, materialize.New(pool, 0, machine.Snapshot{}, 0), evs[:11], 4)
	st := machine.New()
	for _, e := range evs[:11] {
		st.Apply(e)
	}
	m := materialize.New(pool, 0, st.Snapshot(), 11)
	if err := m.Apply(ctx, seqsFrom(12, len(evs)-11), evs[11:]); err != nil {
		t.Fatal(err)
	}
	r := must(s.Usage(ctx, ledger.UsageQuery{AccountID: accA, From: t2, To: t2, By: ledger.ByProject}))(t)
	if len(r.Rows) != 3 || r.Rows[2].Group != projChild || r.Rows[2].Charged != 400_000 || r.Rows[1].Group != projTop {
		t.Errorf("usage by project %+v", r.Rows)
	}
}
