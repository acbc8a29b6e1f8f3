package tables_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// next returns the next change, failing t after a generous deadline.
func next(t *testing.T, ch <-chan ledger.Change) ledger.Change {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("changes channel closed")
		}
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no change within 10s")
	}
	return ledger.Change{}
}

// A change the owner's materializer writes into the tables reaches the feed of another
// connection pool (another process).
func TestChangesAcrossStores(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	writer := f.s
	listenerPool := tablestest.NewPool(t, f.pool.Config().ConnString(), 2)
	listener := tables.New(listenerPool, tables.Options{ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := listener.Changes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := next(t, ch); c.Kind != ledger.ChangeReset {
		t.Fatalf("first change = %+v, want a reset", c)
	}

	a := f.account(t, "default", 0)
	k, _ := f.key(t, a.ID, nil)
	bg := context.Background()
	tests := []struct {
		name string
		do   func() error
		want ledger.Change
	}{
		{"revoke", func() error { return errOf(writer.RevokeKey(bg, k.ID)) }, ledger.Change{Kind: ledger.ChangeKey, KeyID: k.ID}},
		{"disable", func() error { return errOf(writer.SetKeyDisabled(bg, k.ID, true)) }, ledger.Change{Kind: ledger.ChangeKey, KeyID: k.ID}},
		{"enable", func() error { return errOf(writer.SetKeyDisabled(bg, k.ID, false)) }, ledger.Change{Kind: ledger.ChangeKey, KeyID: k.ID}},
		{"suspend", func() error { return errOf(writer.SetAccountSuspended(bg, a.ID, true)) }, ledger.Change{Kind: ledger.ChangeAccount, AccountID: a.ID}},
		{"unsuspend", func() error { return errOf(writer.SetAccountSuspended(bg, a.ID, false)) }, ledger.Change{Kind: ledger.ChangeAccount, AccountID: a.ID}},
		{"top up", func() error { return errOf(writer.TopUp(bg, a.ID, 5, "")) }, ledger.Change{Kind: ledger.ChangeAccount, AccountID: a.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			must(t, tt.do())
			if got := next(t, ch); got != tt.want {
				t.Errorf("change = %+v, want %+v", got, tt.want)
			}
		})
	}

	// Reserve, commit and release (the hot path) announce nothing: the next change seen
	// is the key change that follows them.
	k2, _ := f.key(t, a.ID, nil)
	r := f.mustReserve(t, k2.ID, 1, ledger.PoolGeneral)
	must(t, errOf(writer.Commit(bg, ledger.CommitRequest{ReservationID: r.ID, Actual: 1})))
	r = f.mustReserve(t, k2.ID, 1, ledger.PoolGeneral)
	must(t, errOf(writer.Release(bg, r.ID, "")))
	must(t, errOf(writer.SetKeyDisabled(bg, k2.ID, true)))
	if got := next(t, ch); got != (ledger.Change{Kind: ledger.ChangeKey, KeyID: k2.ID}) {
		t.Errorf("change after reserve, commit, release and disable = %+v, want the key change", got)
	}

	// Losing the connection: a reset after reconnecting, then changes again.
	var killed int
	err = listenerPool.QueryRow(bg, `
		SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'ledger-changes' AND datname = current_database()`).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminated %d listener connections (%v), want 1", killed, err)
	}
	if c := next(t, ch); c.Kind != ledger.ChangeReset {
		t.Fatalf("change after a lost connection = %+v, want a reset", c)
	}
	must(t, errOf(writer.SetKeyDisabled(bg, k2.ID, false)))
	if got := next(t, ch); got != (ledger.Change{Kind: ledger.ChangeKey, KeyID: k2.ID}) {
		t.Errorf("change after reconnecting = %+v", got)
	}

	cancel()
	for range ch { // closes once ctx has ended
	}
}

// until reads changes until want arrives, failing t when it does not within 10 s.
func until(t *testing.T, ch <-chan ledger.Change, want ledger.Change) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				t.Fatal("changes channel closed")
			}
			if c == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %+v within 10s", want)
		}
	}
}

// A project change announces its account (extproc's grants of the account's keys carry
// the allowlists of their projects), and so does a change of a project's ancestor; a
// key moved between projects announces the key.
func TestChangesProjects(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bg := context.Background()
	a := f.account(t, "default", 0)
	other := f.account(t, "default", 0)
	top, err := f.s.CreateProject(bg, ledger.NewProject{AccountID: a.ID, Name: "top"})
	must(t, err)
	child, err := f.s.CreateProject(bg, ledger.NewProject{AccountID: a.ID, ParentID: top.ID, Name: "child"})
	must(t, err)
	k, _ := f.key(t, a.ID, func(nk *ledger.NewKey) { nk.ProjectID = child.ID })
	f.caughtUp(t)

	ch, err := f.s.Changes(ctx)
	must(t, err)
	until(t, ch, ledger.Change{Kind: ledger.ChangeReset})

	accountChange := ledger.Change{Kind: ledger.ChangeAccount, AccountID: a.ID}
	must(t, errOf(f.s.UpdateProject(bg, ledger.ProjectUpdate{ID: top.ID, Models: ledger.To([]string{"demo-chat"})})))
	until(t, ch, accountChange)
	rpm := int64(5)
	must(t, errOf(f.s.UpdateProject(bg, ledger.ProjectUpdate{ID: child.ID, RPM: ledger.To(&rpm)})))
	until(t, ch, accountChange)
	must(t, errOf(f.s.UpdateKey(bg, ledger.KeyUpdate{ID: k.ID, ProjectID: ledger.To(top.ID)})))
	until(t, ch, ledger.Change{Kind: ledger.ChangeKey, KeyID: k.ID})

	// Another account's project change names that account only.
	p, err := f.s.CreateProject(bg, ledger.NewProject{AccountID: other.ID, Name: "other"})
	must(t, err)
	must(t, errOf(f.s.UpdateProject(bg, ledger.ProjectUpdate{ID: p.ID, Name: ledger.To("renamed")})))
	until(t, ch, ledger.Change{Kind: ledger.ChangeAccount, AccountID: other.ID})
}
