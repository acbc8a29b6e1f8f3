package failover_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/engine/codec"
	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/engine/machine"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestReplayEquivalence runs a load with a kill of the owner, stops every process,
// and folds the journal from its first snapshot: the folded state is the one a fresh
// process answers with, the one the materializer wrote into the accounts table, and
// the one the load's answers add up to.
func TestReplayEquivalence(t *testing.T) {
	run := 800 * time.Millisecond
	if testing.Short() {
		run = 400 * time.Millisecond
	}
	c := newCluster(t, 2)
	accts := c.setupAccounts(8, 1_000_000_000)
	l := startLoad(c, accts, 32, "replay")
	time.Sleep(run)
	owner, _ := c.ownerProc()
	if err := owner.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	takeover(t, c, owner, accts[0].id)
	owner.wait(t, 5*time.Second)
	time.Sleep(run)
	pairs := l.finish(t)
	for _, p := range c.procs {
		if p == owner {
			continue
		}
		if code := p.stop(t); code != 0 {
			t.Errorf("%v stopped with %d:\n%s", p, code, tail(p.logs.String(), 20))
		}
	}

	fresh := newProc(t, "fresh", c.db)
	c.procs = append(c.procs, fresh)
	c.led = append(c.led, accountingv1.NewLedgerServiceClient(dial(t, fresh.addr, serviceToken)))
	c.adm = append(c.adm, accountingv1.NewAdminServiceClient(dial(t, fresh.addr, adminToken)))
	c.waitOwner(fresh, 10*time.Second)
	ctx := context.Background()
	var last, materialized int64
	if !waitFor(15*time.Second, func() bool {
		err := c.pool.QueryRow(ctx, `SELECT (SELECT coalesce(max(seq), 0) FROM ledger_journal WHERE shard = 0),
			(SELECT coalesce(max(seq), 0) FROM ledger_materialized WHERE shard = 0)`).Scan(&last, &materialized)
		return err == nil && materialized == last
	}) {
		t.Fatalf("the materializer stands at seq %d, the journal at %d", materialized, last)
	}

	folded, seq, kinds := fold(t, c)
	t.Logf("%d pairs; folded %d journal records onto the first snapshot: %d accounts; events %v", len(pairs), seq, len(folded.Accounts), kinds)
	if kinds["Reserved"] != len(pairs) || kinds["Committed"] != len(pairs) {
		t.Errorf("the journal holds %d reservations and %d commits, the load was answered %d pairs", kinds["Reserved"], kinds["Committed"], len(pairs))
	}
	if seq != last {
		t.Errorf("folded up to seq %d, the journal ends at %d", seq, last)
	}
	byID := map[string]machine.AccountState{}
	for _, a := range folded.Accounts {
		byID[a.ID] = a
	}
	want := expectedBalances(accts, pairs)
	for i, acct := range accts {
		f, ok := byID[acct.id]
		if !ok {
			t.Errorf("account %s is not in the folded state", acct.id)
			continue
		}
		if int64(f.Balance) != want[i] || f.Reserved != 0 || f.InFlight != 0 {
			t.Errorf("folded account %d: balance %d reserved %d in flight %d, want balance %d (the answered charges), nothing held",
				i, f.Balance, f.Reserved, f.InFlight, want[i])
		}
		r, err := c.adm[len(c.procs)-1].GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: acct.id})
		if err != nil {
			t.Fatal(err)
		}
		if g := r.GetAccount(); g.GetBalanceMicros() != int64(f.Balance) || g.GetReservedMicros() != int64(f.Reserved) ||
			int(g.GetInFlight()) != f.InFlight {
			t.Errorf("account %d: the fresh process answers balance %d reserved %d in flight %d, the fold %d %d %d",
				i, g.GetBalanceMicros(), g.GetReservedMicros(), g.GetInFlight(), f.Balance, f.Reserved, f.InFlight)
		}
	}

	rows, err := c.pool.Query(ctx, `SELECT id::text, balance, reserved, in_flight FROM accounts`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var id string
		var balance, reserved, inFlight int64
		if err := rows.Scan(&id, &balance, &reserved, &inFlight); err != nil {
			t.Fatal(err)
		}
		n++
		f := byID[id]
		if f.ID == "" || balance != int64(f.Balance) || reserved != int64(f.Reserved) || inFlight != int64(f.InFlight) {
			t.Errorf("accounts row %s: balance %d reserved %d in flight %d, the fold %+v", id, balance, reserved, inFlight, f)
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if n != len(folded.Accounts) {
		t.Errorf("the accounts table has %d rows, the fold %d accounts", n, len(folded.Accounts))
	}
	var charges, charged int64
	if err := c.pool.QueryRow(ctx, `SELECT count(*), coalesce(-sum(amount), 0) FROM ledger_entries WHERE kind = 'charge'`).
		Scan(&charges, &charged); err != nil {
		t.Fatal(err)
	}
	var answered int64
	for _, p := range pairs {
		answered += p.charged
	}
	if charges != int64(len(pairs)) || charged != answered {
		t.Errorf("ledger_entries hold %d charges of %d, the load was answered %d commits charging %d", charges, charged, len(pairs), answered)
	}
}

// fold rebuilds the state from the journal's first snapshot and every record after
// it, checks the state's invariants, and returns it with the last seq folded and how
// many events of each kind the journal holds.
func fold(t testing.TB, c *cluster) (machine.Snapshot, int64, map[string]int) {
	t.Helper()
	ctx := context.Background()
	j := journal.New(c.pool, 0)
	seq, body, err := j.SnapshotAtOrBefore(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		t.Fatal("the journal has no first snapshot")
	}
	var sn machine.Snapshot
	if err := json.Unmarshal(body, &sn); err != nil {
		t.Fatal(err)
	}
	st := machine.Restore(sn)
	kinds := map[string]int{}
	for {
		recs, err := j.Read(ctx, seq, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if r.Seq != seq+1 {
				t.Fatalf("journal gap: seq %d after %d", r.Seq, seq)
			}
			ev, err := codec.Decode(r.Body)
			if err != nil {
				t.Fatalf("journal seq %d: %v", r.Seq, err)
			}
			st.Apply(ev)
			kinds[strings.TrimPrefix(strings.TrimPrefix(fmt.Sprintf("%T", ev), "*"), "machine.")]++
			seq = r.Seq
		}
	}
	if err := st.Check(); err != nil {
		t.Errorf("the folded state breaks an invariant: %v", err)
	}
	return st.Snapshot(), seq, kinds
}
