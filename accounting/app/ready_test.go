package app_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// readyz is a replica's readiness: its status code and body.
func readyz(p *process) (int, string) {
	resp, err := http.Get("http://" + p.metricsAddr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitReady waits until every one of ps answers /readyz 200, and stays so for a
// little while (a replica that flaps is not ready).
func waitReady(t *testing.T, within time.Duration, ps ...*process) {
	t.Helper()
	deadline := time.Now().Add(within)
	var since time.Time
	for {
		ok := true
		for i, p := range ps {
			if code, body := readyz(p); code != http.StatusOK {
				ok = false
				if time.Now().After(deadline) {
					t.Fatalf("replica %d: /readyz = %d %q after %v", i, code, body, within)
				}
			}
		}
		switch {
		case !ok:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) > 2*time.Second:
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// owners counts the replicas that log "ledger owner": how many times one took the
// ledger.
func owners(p *process) int { return strings.Count(p.logs.String(), `"msg":"ledger owner"`) }

// TestStandbyIsReadyAfterAFence: an owner fenced by a takeover follows the journal
// as a standby of the new owner, and is ready as such — not 503 until it owns the
// ledger again.
func TestStandbyIsReadyAfterAFence(t *testing.T) {
	db := tablestest.NewDB(t)
	a := start(t, db, "--sweep-interval", "200ms")
	waitReady(t, 30*time.Second, a)
	b := start(t, db, "--sweep-interval", "200ms")
	waitReady(t, 30*time.Second, a, b)
	if owners(a) != 1 || owners(b) != 0 {
		t.Fatalf("a took the ledger %d times, b %d; want 1, 0", owners(a), owners(b))
	}

	// Another epoch takes the ledger from a and lets its lease lapse at once: b takes
	// it over, and a finds itself fenced at its next renewal.
	conn := tablestest.NewPool(t, db, 2)
	if _, err := conn.Exec(context.Background(),
		`UPDATE ledger_owner SET epoch = epoch + 1, owner = 'fencer', lease_until = clock_timestamp()`); err != nil {
		t.Fatal(err)
	}
	for t0 := time.Now(); owners(b) == 0 || !strings.Contains(a.logs.String(), "fenced"); time.Sleep(20 * time.Millisecond) {
		if time.Since(t0) > 30*time.Second {
			t.Fatalf("no takeover by b, or a not fenced:\na: %s\nb: %s", a.logs.String(), b.logs.String())
		}
	}
	// Past the time the sweeper needs to call a replica away (3 sweeps + 2 s).
	time.Sleep(3 * time.Second)
	waitReady(t, 15*time.Second, a, b)
	if owners(a) != 1 {
		t.Fatalf("a took the ledger again (%d times): the test wants it a standby", owners(a))
	}
}

// TestReplicasAreReadyAfterLosingTheDatabase: every connection of both replicas is
// cut for a second (the standby's read of the journal fails and it starts over; the
// owner's renewals fail and are retried): once the database answers again, both are ready, the one
// that does not own the ledger as a standby.
func TestReplicasAreReadyAfterLosingTheDatabase(t *testing.T) {
	db := tablestest.NewDB(t)
	a := start(t, db, "--sweep-interval", "200ms")
	waitReady(t, 30*time.Second, a)
	b := start(t, db, "--sweep-interval", "200ms")
	waitReady(t, 30*time.Second, a, b)

	conn := tablestest.NewPool(t, db, 2)
	for t0 := time.Now(); time.Since(t0) < time.Second; time.Sleep(20 * time.Millisecond) {
		if _, err := conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
			t.Fatal(err)
		}
	}
	// The standby lost a read of the journal: it started over.
	for t0 := time.Now(); !strings.Contains(b.logs.String(), "rebuilding"); time.Sleep(20 * time.Millisecond) {
		if time.Since(t0) > 30*time.Second {
			t.Fatalf("a replica did not start over:\na: %s\nb: %s", a.logs.String(), b.logs.String())
		}
	}
	time.Sleep(3 * time.Second)
	waitReady(t, 20*time.Second, a, b)
}
