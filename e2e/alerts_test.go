package e2e_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// hookReceiver is a webhook receiver on loopback: it verifies each delivery by the
// Standard Webhooks algorithm (written here from the convention), answers 500 to the
// first attempt of every event and 204 after, and keeps what it accepted.
type hookReceiver struct {
	mu       sync.Mutex
	secret   string
	attempts map[string]int
	accepted []map[string]any
	bad      []string
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(h.secret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	var ev map[string]any
	if !hmac.Equal([]byte(r.Header.Get("webhook-signature")), []byte(want)) || json.Unmarshal(body, &ev) != nil || ev["id"] != id {
		h.bad = append(h.bad, string(body))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	h.attempts[id]++
	if h.attempts[id] == 1 {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	h.accepted = append(h.accepted, ev)
	w.WriteHeader(http.StatusNoContent)
}

// summary is the accepted events as "type" or "budget.threshold P", with counts.
func (h *hookReceiver) summary() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, ev := range h.accepted {
		name := ev["type"].(string)
		if name == "budget.threshold" {
			name += fmt.Sprint(" ", ev["data"].(map[string]any)["percent"])
		}
		out[name]++
	}
	return out
}

// TestAlertWebhooks spends a key across every budget threshold of its daily limit and
// an account below its low balance: the receiver gets balance.low once and
// budget.threshold at 50, 80, 95 and 100 % once each, every one signed and retried
// with the same id after a 500.
func TestAlertWebhooks(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "1"})
	rc := &hookReceiver{attempts: map[string]int{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	h := ctl(t, "webhook", "create", "--account", c.account, "--url", srv.URL+"/hook", "--allow-private")
	rc.mu.Lock()
	rc.secret, _ = h["secret"].(string)
	rc.mu.Unlock()
	if !strings.HasPrefix(rc.secret, "whsec_") || fmt.Sprint(h["events"]) != "[]" {
		t.Fatalf("webhook create printed %v", h)
	}
	if out, err := ctlRaw("webhook", "create", "--account", c.account, "--url", srv.URL); err == nil {
		t.Errorf("a loopback URL without --allow-private was accepted: %s", out)
	}

	body := []byte(`{"model":"demo-chat","max_tokens":100,"messages":[{"role":"user","content":"[[mock:tokens=100]] hi"}]}`)
	spend := func() {
		t.Helper()
		if status, _, b := rawRequest(t, http.MethodPost, "/chat/completions", c.key, body); status != http.StatusOK {
			t.Fatalf("request: %d %s", status, b)
		}
	}
	spent := func() int64 {
		t.Helper()
		c.waitSettled(t)
		return micros(t, ctl(t, "key", "show", c.keyID), "spent_today")
	}
	spend()
	cost := spent() // one request's charge
	// 50 % after 10 requests, 80 % after 16; the 19th is admitted (18 + a hold ≤ 19.5)
	// and the limit lowered to 19 while it runs: its commit reaches 95 and 100 %.
	ctl(t, "key", "update", c.keyID, "--daily-limit", ledger.FormatCredits(cost*39/2))
	// Available credits: 1 − 18 charges; low under 1 − 12 charges.
	ctl(t, "account", "update", c.account, "--low-balance", ledger.FormatCredits(1_000_000-12*cost))
	for range 17 {
		spend()
	}
	if got := spent(); got != 18*cost {
		t.Fatalf("spent %d, want 18 × %d", got, cost)
	}
	slow := []byte(`{"model":"demo-chat","max_tokens":100,"messages":[{"role":"user","content":"[[mock:tokens=100]] [[mock:slow=2]] hi"}]}`)
	done := make(chan int)
	go func() {
		status, _, _ := rawRequest(t, http.MethodPost, "/chat/completions", c.key, slow)
		done <- status
	}()
	for deadline := time.Now().Add(10 * time.Second); micros(t, ctl(t, "account", "show", c.account), "reserved") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the slow request was never admitted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctl(t, "key", "update", c.keyID, "--daily-limit", ledger.FormatCredits(cost*19))
	if status := <-done; status != http.StatusOK {
		t.Fatalf("the slow request: %d", status)
	}
	if got := spent(); got < 19*cost || got > 19*cost+cost/10 { // its directive costs an input token more
		t.Fatalf("spent %d, want about 19 × %d", got, cost)
	}

	want := map[string]int{"balance.low": 1, "budget.threshold 50": 1, "budget.threshold 80": 1,
		"budget.threshold 95": 1, "budget.threshold 100": 1}
	deadline := time.Now().Add(20 * time.Second)
	for fmt.Sprint(rc.summary()) != fmt.Sprint(want) {
		if time.Now().After(deadline) {
			t.Fatalf("received %v, want %v", rc.summary(), want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rc.mu.Lock()
	for id, n := range rc.attempts {
		if n != 2 {
			t.Errorf("event %s attempted %d times, want 2 (500, then 204)", id, n)
		}
	}
	if len(rc.bad) > 0 {
		t.Errorf("deliveries that did not verify: %q", rc.bad)
	}
	rc.mu.Unlock()
	ds := ctl(t, "webhook", "deliveries", h["id"].(string))["deliveries"].([]any)
	if len(ds) != 5 {
		t.Fatalf("deliveries %v", ds)
	}
	for _, d := range ds {
		d := d.(map[string]any)
		if fmt.Sprint(d["attempts"]) != "2" || fmt.Sprint(d["last_status"]) != "204" || d["delivered_at"] == nil || d["next_attempt_at"] != nil {
			t.Errorf("delivery %v", d)
		}
	}
}
