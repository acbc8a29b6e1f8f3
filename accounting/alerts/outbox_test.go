package alerts_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/alerts"
	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/engine/materialize"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

func TestMain(m *testing.M) { tablestest.Main(m) }

const (
	acct = "0a000000-0000-4000-8000-0000000000a1"
	key  = "0b000000-0000-4000-8000-0000000000b1"
)

func testKeys(t *testing.T) *alerts.Keys {
	t.Helper()
	k, err := alerts.ParseKeys(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32))))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// verify checks a delivery as a receiver would, from the Standard Webhooks convention:
// HMAC-SHA256 over "{id}.{timestamp}.{body}" keyed with the secret's bytes after
// "whsec_", base64, after "v1,".
func verify(secret string, h http.Header, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

type received struct {
	id, typ string
	body    map[string]any
	ts      int64
}

// receiver answers 500 to the first attempt of every event and 2xx after, keeping
// each verified delivery.
type receiver struct {
	mu       sync.Mutex
	secret   string
	attempts map[string]int
	got      []received
	bad      int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !verify(rc.secret, r.Header, body) {
		rc.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	id := r.Header.Get("webhook-id")
	rc.attempts[id]++
	if rc.attempts[id] == 1 {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	var ev map[string]any
	_ = json.Unmarshal(body, &ev)
	ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	rc.got = append(rc.got, received{id: id, typ: ev["type"].(string), body: ev, ts: ts})
	w.WriteHeader(http.StatusNoContent)
}

// TestOutboxDeliversEachAlertOnce decides alerts in the machine, materializes them
// (twice over: the second materializer writes nothing again), and lets the worker
// deliver them to a receiver that fails every first attempt.
func TestOutboxDeliversEachAlertOnce(t *testing.T) {
	ctx := context.Background()
	pool := tablestest.NewPool(t, tablestest.NewDB(t), 4)
	keys := testKeys(t)
	whs := &alerts.Webhooks{Pool: pool, Keys: keys}

	rc := &receiver{attempts: map[string]int{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	h, err := whs.CreateWebhook(ctx, acct, srv.URL+"/hook", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	rc.secret = h.Secret
	only, err := whs.CreateWebhook(ctx, acct, srv.URL+"/revoked-only", []string{machine.AlertKeyRevoked}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := whs.CreateWebhook(ctx, acct, "http://127.0.0.1/x", nil, false); ledger.ReasonOf(err) != ledger.ReasonInvalidArgument {
		t.Errorf("a loopback url without allow-private: %v", err)
	}
	if _, err := whs.CreateWebhook(ctx, acct, srv.URL, []string{"balance.lo"}, true); ledger.ReasonOf(err) != ledger.ReasonInvalidArgument {
		t.Errorf("an unknown event type: %v", err)
	}

	st := machine.New()
	var evs []machine.Event
	at := time.Now().UTC().Truncate(time.Microsecond) // after the webhooks: they take what is decided after them
	decide := func(c machine.Command) machine.Answer {
		ans, e := st.Decide(c)
		if ans.Err != nil {
			t.Fatalf("%T: %v", c, ans.Err)
		}
		evs = append(evs, e...)
		return ans
	}
	decide(machine.CreateAccount{ID: acct, At: at})
	decide(machine.TopUp{AccountID: acct, Amount: 10_000_000, At: at})
	decide(machine.UpdateAccount{Update: ledger.AccountUpdate{ID: acct, LowBalance: ledger.To(ptr[ledger.Micros](9_500_000))}, At: at})
	decide(machine.CreateKey{ID: key, Key: ledger.NewKey{AccountID: acct, Hash: make([]byte, 32), DailyLimit: ptr[ledger.Micros](1_000_000)}, At: at})
	for i, amount := range []ledger.Micros{500_000, 300_000} {
		r := decide(machine.Reserve{ID: "0c000000-0000-4000-8000-00000000000" + strconv.Itoa(i), At: at,
			Request: ledger.ReserveRequest{RequestID: "r" + strconv.Itoa(i), KeyID: key, Model: "m", Amount: amount, Pool: ledger.PoolGeneral}})
		decide(machine.Commit{Request: ledger.CommitRequest{ReservationID: r.Reservation.ID, Actual: amount}, At: at})
	}
	decide(machine.RevokeKey{KeyID: key, At: at})
	seqs := make([]int64, len(evs))
	for i := range seqs {
		seqs[i] = int64(i + 1)
	}
	for range 2 { // a second materializer from the start writes nothing twice
		if err := materialize.New(pool, 0, machine.Snapshot{}, 0).Apply(ctx, seqs, evs); err != nil {
			t.Fatal(err)
		}
	}
	// budget 50 and 80, balance.low (10 − 0.5 held < 9.5), key.revoked; and the filter.
	want := map[string]int{machine.AlertBudgetThreshold: 2, machine.AlertBalanceLow: 1, machine.AlertKeyRevoked: 1}

	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&alerts.Worker{Pool: pool, Keys: keys, Owning: func() bool { return true }, Poll: 20 * time.Millisecond}).Run(wctx)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ds, err := whs.WebhookDeliveries(ctx, h.ID, 50)
		if err != nil {
			t.Fatal(err)
		}
		pending := 0
		for _, d := range ds {
			if d.DeliveredAt == nil {
				pending++
			}
		}
		if len(ds) == 4 && pending == 0 {
			for _, d := range ds {
				if d.Attempts != 2 || d.LastStatus == nil || *d.LastStatus != 204 || d.NextAttemptAt != nil {
					t.Errorf("delivery %+v: want 2 attempts, the last 204, nothing next", d)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries %+v after 15 s", ds)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done
	rc.mu.Lock()
	defer rc.mu.Unlock()
	got := map[string]int{}
	for _, r := range rc.got {
		got[r.typ]++
		if !strings.HasPrefix(r.id, "evt_") || r.body["id"] != r.id {
			t.Errorf("event %s with body %v", r.id, r.body)
		}
		if d := time.Since(time.Unix(r.ts, 0)); d < -time.Second || d > time.Minute {
			t.Errorf("timestamp %d is not now", r.ts)
		}
	}
	for typ, n := range want {
		if got[typ]-n != 0 {
			t.Errorf("received %v, want %v", got, want)
			break
		}
	}
	// The receiver got the revocation at the filtered webhook too (its secret differs:
	// the receiver refused it), and nothing else there.
	ds, err := whs.WebhookDeliveries(ctx, only.ID, 50)
	if err != nil || len(ds) != 1 || ds[0].Type != machine.AlertKeyRevoked {
		t.Errorf("the key.revoked-only webhook's deliveries: %+v, %v", ds, err)
	}
	var budget map[string]any
	for _, r := range rc.got {
		if r.typ == machine.AlertBudgetThreshold && r.body["data"].(map[string]any)["percent"] == float64(80) {
			budget = r.body["data"].(map[string]any)
		}
	}
	wantData := map[string]any{"account_id": acct, "key_id": key, "window": "day", "percent": float64(80),
		"limit": "1", "spent": "0.8", "window_start": at.Truncate(24 * time.Hour).Format("2006-01-02T15:04:05.000000Z")}
	if len(budget) != len(wantData) {
		t.Errorf("budget 80 data %v, want %v", budget, wantData)
	}
	for k, v := range wantData {
		if budget[k] != v {
			t.Errorf("budget 80 data %s = %v, want %v", k, budget[k], v)
		}
	}
}

func TestWebhookTestAndDelete(t *testing.T) {
	ctx := context.Background()
	pool := tablestest.NewPool(t, tablestest.NewDB(t), 4)
	whs := &alerts.Webhooks{Pool: pool, Keys: testKeys(t)}
	h, err := whs.CreateWebhook(ctx, acct, "http://127.0.0.1:1/none", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h.Secret, "whsec_") {
		t.Errorf("secret %q", h.Secret)
	}
	if raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(h.Secret, "whsec_")); len(raw) < 24 || len(raw) > 32 {
		t.Errorf("secret of %d bytes", len(raw))
	}
	var sealed []byte
	if err := pool.QueryRow(ctx, `SELECT secret FROM webhooks WHERE id = $1`, h.ID).Scan(&sealed); err != nil || strings.Contains(string(sealed), h.Secret[6:]) {
		t.Errorf("the secret is stored in the clear (%v)", err)
	}
	id, err := whs.TestWebhook(ctx, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := whs.WebhookDeliveries(ctx, h.ID, 10)
	if err != nil || len(ds) != 1 || ds[0].EventID != id || ds[0].Type != alerts.TypeTest || ds[0].Attempts != 0 || ds[0].LastStatus != nil || ds[0].NextAttemptAt == nil {
		t.Fatalf("deliveries %+v, %v", ds, err)
	}
	list, err := whs.ListWebhooks(ctx, acct)
	if err != nil || len(list) != 1 || list[0].Secret != "" || list[0].URL != h.URL {
		t.Fatalf("list %+v, %v", list, err)
	}
	if err := whs.DeleteWebhook(ctx, h.ID); err != nil {
		t.Fatal(err)
	}
	if err := whs.DeleteWebhook(ctx, h.ID); err != ledger.ErrNotFound {
		t.Errorf("deleting again: %v", err)
	}
	if _, err := whs.TestWebhook(ctx, h.ID); err != ledger.ErrNotFound {
		t.Errorf("testing a deleted webhook: %v", err)
	}
	if ds, _ := whs.WebhookDeliveries(ctx, h.ID, 10); len(ds) != 1 || ds[0].NextAttemptAt != nil {
		t.Errorf("a deleted webhook's pending delivery: %+v", ds)
	}
	if list, _ := whs.ListWebhooks(ctx, acct); len(list) != 0 {
		t.Errorf("list after delete: %+v", list)
	}
}

func ptr[T any](v T) *T { return &v }

// TestStandbyDoesNotDeliver runs the worker of a process that does not own the ledger:
// the outbox waits until it owns it.
func TestStandbyDoesNotDeliver(t *testing.T) {
	ctx := context.Background()
	pool := tablestest.NewPool(t, tablestest.NewDB(t), 4)
	keys := testKeys(t)
	whs := &alerts.Webhooks{Pool: pool, Keys: keys}
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
	}))
	defer srv.Close()
	h, err := whs.CreateWebhook(ctx, acct, srv.URL, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := whs.TestWebhook(ctx, h.ID); err != nil {
		t.Fatal(err)
	}
	var owning sync.Mutex
	owns := false
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go (&alerts.Worker{Pool: pool, Keys: keys, Poll: 10 * time.Millisecond, Owning: func() bool {
		owning.Lock()
		defer owning.Unlock()
		return owns
	}}).Run(wctx)
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	if calls != 0 {
		t.Fatalf("a standby delivered %d times", calls)
	}
	mu.Unlock()
	owning.Lock()
	owns = true
	owning.Unlock()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ds, _ := whs.WebhookDeliveries(ctx, h.ID, 1)
		if len(ds) == 1 && ds[0].DeliveredAt != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not delivered once owning: %+v", ds)
		}
	}
}
