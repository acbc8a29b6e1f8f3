package failover_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPausedOwnerIsFencedAcrossProcesses pauses the owner (SIGSTOP) while a thousand
// requests on one hot account are in flight, lets the standby take over, and resumes
// the old owner: it stops with a non-zero exit and never writes again, and the hot
// account holds exactly the answered charges.
func TestPausedOwnerIsFencedAcrossProcesses(t *testing.T) {
	workers := 1000
	run := time.Second
	if testing.Short() {
		run = 500 * time.Millisecond
	}
	c := newCluster(t, 2)
	accts := c.setupAccounts(1, 1_000_000_000_000)
	l := startLoad(c, accts, workers, "hot")
	time.Sleep(run)

	old, row := c.ownerProc()
	paused := time.Now()
	if err := old.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	atPause := l.done.Load()
	var cur ownerRow
	if !waitFor(10*time.Second, func() bool {
		var err error
		cur, err = c.owner(context.Background())
		return err == nil && cur.Epoch > row.Epoch && cur.Live
	}) {
		t.Fatalf("no takeover while the owner is paused: %+v", cur)
	}
	tookOver := time.Since(paused)
	oldRows, oldLast := epochRows(t, c, row.Epoch)
	t.Logf("paused %v (epoch %d) after %d pairs; %s took over as epoch %d after %v; the old epoch wrote %d records, the last seq %d",
		old, row.Epoch, atPause, cur.Addr, cur.Epoch, tookOver, oldRows, oldLast)

	time.Sleep(run / 2) // the new owner serves while the old one is still paused
	if err := old.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Fail-stop: the resumed owner drops its memory and rebuilds itself as a standby
	// of the new owner; it never writes again under its old epoch.
	if !waitFor(10*time.Second, func() bool {
		return strings.Contains(old.logs.String(), "rebuilding from the journal as a standby")
	}) {
		t.Fatalf("the resumed owner did not stop owning:\n%s", tail(old.logs.String(), 20))
	}
	errs := strings.Join(old.errorLines(), "\n")
	t.Logf("the resumed owner stopped: %s", errs)
	if !strings.Contains(errs, "fenced") {
		t.Errorf("the resumed owner's errors do not say another process took over:\n%s", tail(old.logs.String(), 20))
	}
	time.Sleep(run / 2)
	pairs := l.finish(t)

	// The old epoch wrote nothing after the takeover; epochs grow with seq.
	if n, last := epochRows(t, c, row.Epoch); n != oldRows || last != oldLast {
		t.Errorf("the old epoch %d wrote after the takeover: %d records up to seq %d, %d up to %d at the takeover",
			row.Epoch, n, last, oldRows, oldLast)
	}
	checkEpochs(t, c, oldLast, cur.Epoch)

	reserves, fresh, replayed := retryStats(pairs)
	t.Logf("%d pairs by %d workers on one account; after failed attempts: %d reserves answered, %d commits answered fresh, %d as replays",
		len(pairs), workers, reserves, fresh, replayed)
	if reserves+fresh+replayed == 0 {
		t.Errorf("no call failed over: the pause did not hit the load")
	}
	checkAccounts(t, c, accts, pairs)
	checkRetries(t, c, accts, pairs, 1000)
}

// epochRows is how many journal records epoch wrote and the last one's seq.
func epochRows(t testing.TB, c *cluster, epoch int64) (n, last int64) {
	t.Helper()
	if err := c.pool.QueryRow(context.Background(), `SELECT count(*), coalesce(max(seq), 0) FROM ledger_journal
		WHERE shard = 0 AND epoch = $1`, epoch).Scan(&n, &last); err != nil {
		t.Fatal(err)
	}
	return n, last
}

// checkEpochs reads the whole journal: epochs never go down as seq grows, every record
// after seq after has epoch newEpoch or later, and the owner row has the newest epoch.
func checkEpochs(t testing.TB, c *cluster, after, newEpoch int64) {
	t.Helper()
	ctx := context.Background()
	rows, err := c.pool.Query(ctx, `SELECT seq, epoch FROM ledger_journal WHERE shard = 0 ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var prevSeq, prevEpoch, n int64
	for rows.Next() {
		var seq, epoch int64
		if err := rows.Scan(&seq, &epoch); err != nil {
			t.Fatal(err)
		}
		n++
		switch {
		case seq != prevSeq+1:
			t.Errorf("journal gap: seq %d after %d", seq, prevSeq)
		case epoch < prevEpoch:
			t.Errorf("seq %d has epoch %d after epoch %d", seq, epoch, prevEpoch)
		case seq > after && epoch < newEpoch:
			t.Errorf("seq %d, after the takeover at %d, has epoch %d, older than the new owner's %d", seq, after, epoch, newEpoch)
		}
		prevSeq, prevEpoch = seq, epoch
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	o, err := c.owner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.Epoch != prevEpoch {
		t.Errorf("the owner row has epoch %d, the journal's last record %d", o.Epoch, prevEpoch)
	}
	t.Logf("journal: %d records, epochs up to %d, all after seq %d of epoch %d or later", n, prevEpoch, after, newEpoch)
}
