package alerts

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

func claimKeys(t *testing.T) *Keys {
	t.Helper()
	k, err := ParseKeys(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("c", 32))))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const claimAcct = "0a000000-0000-4000-8000-0000000000c1"

// TestClaimOfADeadWorkerLapsesAfterTheAttempt: a delivery claimed by a worker that
// never records its attempt (it died) is taken over once the attempt's deadline and a
// small margin have passed, not before (a live worker's attempt may still be on the
// wire until its deadline), and the first worker's late record changes nothing.
func TestClaimOfADeadWorkerLapsesAfterTheAttempt(t *testing.T) {
	ctx := context.Background()
	pool := tablestest.NewPool(t, tablestest.NewDB(t), 4)
	keys := claimKeys(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	whs := &Webhooks{Pool: pool, Keys: keys, Now: func() time.Time { return t0 }}
	h, err := whs.CreateWebhook(ctx, claimAcct, "http://127.0.0.1:1/x", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	eventID, err := whs.TestWebhook(ctx, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) *Worker {
		return &Worker{Pool: pool, Keys: keys, Now: func() time.Time { return t0.Add(d) }, Log: testLog(t)}
	}
	a := at(0)
	before := time.Now()
	ds, err := a.claim(ctx, 10)
	if err != nil || len(ds) != 1 || ds[0].eventID != eventID {
		t.Fatalf("the first claim: %+v, %v", ds, err)
	}
	if after := time.Now(); ds[0].deadline.Before(before.Add(AttemptTimeout)) || ds[0].deadline.After(after.Add(AttemptTimeout)) {
		t.Errorf("the attempt's deadline %v after the claim began, want %v after a moment of the claim", ds[0].deadline.Sub(before), AttemptTimeout)
	}
	if !ds[0].claim.Equal(t0.Add(claimLease)) {
		t.Errorf("claimed until %v, want %v", ds[0].claim, t0.Add(claimLease))
	}
	// Until the attempt's deadline and the margin, no one else takes it.
	for _, d := range []time.Duration{time.Second, AttemptTimeout, claimLease - time.Microsecond} {
		if got, err := at(d).claim(ctx, 10); err != nil || len(got) != 0 {
			t.Fatalf("claimed again %v after the first claim: %+v, %v", d, got, err)
		}
	}
	// The worker died mid-attempt: its claim lapses after the attempt's bound plus a
	// margin of seconds.
	takeover := AttemptTimeout + 3*time.Second
	b := at(takeover)
	got, err := b.claim(ctx, 10)
	if err != nil || len(got) != 1 || got[0].eventID != eventID {
		t.Fatalf("not taken over %v after a dead worker's claim: %+v, %v", takeover, got, err)
	}
	// The first worker was only slow: its record comes after the takeover and is
	// refused, whatever it says.
	status := 204
	a.record(ctx, ds[0], &status, "", true, false)
	var attempts int
	var next, delivered *time.Time
	row := `SELECT attempts, next_attempt_at, delivered_at FROM webhook_deliveries WHERE webhook_id = $1 AND event_id = $2`
	if err := pool.QueryRow(ctx, row, h.ID, eventID).Scan(&attempts, &next, &delivered); err != nil {
		t.Fatal(err)
	}
	if attempts != 0 || delivered != nil || next == nil || !next.Equal(got[0].claim) {
		t.Fatalf("after a lapsed claim's record: %d attempts, next %v, delivered %v; want the takeover's claim %v untouched",
			attempts, next, delivered, got[0].claim)
	}
	status = 500
	b.record(ctx, got[0], &status, "HTTP 500", false, false)
	if err := pool.QueryRow(ctx, row, h.ID, eventID).Scan(&attempts, &next, &delivered); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || delivered != nil || next == nil || !next.Equal(t0.Add(takeover+retryDelays[0])) {
		t.Fatalf("after the takeover's record: %d attempts, next %v, delivered %v", attempts, next, delivered)
	}
}

// TestKilledMidAttemptRetriedInSeconds runs a worker whose receiver never answers and
// kills it (its pool closed, its context ended) while the attempt is on the wire; a
// second worker sends the same event once the attempt's deadline and the margin have
// passed: seconds, not tens of seconds, and never while the first attempt could run.
func TestKilledMidAttemptRetriedInSeconds(t *testing.T) {
	ctx := context.Background()
	url := tablestest.NewDB(t)
	keys := claimKeys(t)
	whs := &Webhooks{Pool: tablestest.NewPool(t, url, 2), Keys: keys}

	type hit struct {
		id string
		at time.Time
	}
	hits := make(chan hit, 10)
	var mu sync.Mutex
	answered := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then a client that goes away ends r.Context()
		hits <- hit{r.Header.Get("webhook-id"), time.Now()}
		mu.Lock()
		hang := !answered
		answered = true
		mu.Unlock()
		if hang { // the first attempt never gets an answer
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	h, err := whs.CreateWebhook(ctx, claimAcct, srv.URL, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	eventID, err := whs.TestWebhook(ctx, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	run := func(pool interface{ Close() }, w *Worker) (stop func()) {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); w.Run(wctx) }()
		return func() { pool.Close(); cancel(); <-done }
	}
	poolA := tablestest.NewPool(t, url, 2)
	killA := run(poolA, &Worker{Pool: poolA, Keys: keys, Owning: func() bool { return true }, Poll: 20 * time.Millisecond, Log: testLog(t)})
	var first hit
	select {
	case first = <-hits:
	case <-time.After(5 * time.Second):
		t.Fatal("no first attempt")
	}
	killA() // nothing of its attempt is recorded: as a kill -9
	poolB := tablestest.NewPool(t, url, 2)
	stopB := run(poolB, &Worker{Pool: poolB, Keys: keys, Owning: func() bool { return true }, Poll: 20 * time.Millisecond, Log: testLog(t)})
	defer stopB()
	var second hit
	select {
	case second = <-hits:
	case <-time.After(15 * time.Second):
		t.Fatal("the event was not sent again within 15 s of a kill mid-attempt")
	}
	after := second.at.Sub(first.at)
	t.Logf("sent again %v after the attempt the kill cut", after.Round(time.Millisecond))
	if first.id != eventID || second.id != eventID {
		t.Errorf("webhook-ids %s then %s, want %s both times", first.id, second.id, eventID)
	}
	if after < AttemptTimeout || after > claimLease+2*time.Second {
		t.Errorf("sent again %v after the cut attempt, want between its %v deadline and %v", after, AttemptTimeout, claimLease+2*time.Second)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ds, _ := whs.WebhookDeliveries(ctx, h.ID, 1)
		if len(ds) == 1 && ds[0].DeliveredAt != nil {
			if ds[0].Attempts != 1 {
				t.Errorf("%d attempts recorded, want 1 (the cut one never was)", ds[0].Attempts)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not recorded as delivered: %+v", ds)
		}
	}
}

func testLog(t *testing.T) *zap.Logger { return zaptest.NewLogger(t) }
