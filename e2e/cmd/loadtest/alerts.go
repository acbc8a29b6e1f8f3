package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/e2e/internal/harness"
	"github.com/llmgw/gateway/e2e/stack"
)

// silentReceiver accepts connections and reads what comes, and never answers: every
// webhook attempt to it runs into the worker's 5 s timeout.
type silentReceiver struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	done  sync.WaitGroup
}

func newSilentReceiver() (*silentReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &silentReceiver{ln: ln}
	r.done.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns = append(r.conns, c)
			r.mu.Unlock()
			r.done.Go(func() { _, _ = io.Copy(io.Discard, c) })
		}
	})
	return r, nil
}

func (r *silentReceiver) url() string { return "http://" + r.ln.Addr().String() + "/hook" }

func (r *silentReceiver) Close() {
	_ = r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.done.Wait()
}

// armAlerts subscribes every load account to the silent receiver and sets thresholds
// that the run crosses: a key's daily limit of 1.2 times what the key is expected to
// spend (requests the run sends it × the cost of one request), so its budget.threshold
// 50 and 80 % fire at 60 and 96 % of the run and the limit keeps room for the holds in
// flight (at 1.1, two requests of 5,000 were refused when latency reached 0.6 s), and a low balance a twentieth
// of that spend under the top-up, so balance.low fires early. cost is one request's
// charge (measured with the first key). It returns the alerts each account is expected
// to raise.
func armAlerts(s *stack.Stack, accts []loadAccount, recv *silentReceiver, cost ledger.Micros, perKey float64) (int, error) {
	spend := ledger.Micros(math.Ceil(float64(cost) * perKey))
	for _, a := range accts {
		if _, err := harness.Ctl(s, "webhook", "create", "--account", a.id, "--url", recv.url(), "--allow-private"); err != nil {
			return 0, err
		}
		if _, err := harness.Ctl(s, "key", "update", a.keyID, "--daily-limit", ledger.FormatCredits6(spend*12/10)); err != nil {
			return 0, err
		}
		if _, err := harness.Ctl(s, "account", "update", a.id, "--low-balance", ledger.FormatCredits6(topUp-spend/20)); err != nil {
			return 0, err
		}
	}
	return 3 * len(accts), nil // balance.low, budget.threshold 50 and 80
}

// oneRequestCost sends one request with the first key and returns what it was charged,
// once settled.
func oneRequestCost(s *stack.Stack, a loadAccount, body []byte) (ledger.Micros, error) {
	req, _ := http.NewRequest(http.MethodPost, s.BaseURL+"/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("the request that measures a request's cost: status %d", resp.StatusCode)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, err := harness.Ctl(s, "key", "show", a.keyID)
		if err != nil {
			return 0, err
		}
		var k struct {
			Spent int64 `json:"spent_today_micros"`
		}
		if err := json.Unmarshal(out, &k); err != nil {
			return 0, err
		}
		if k.Spent > 0 {
			return ledger.Micros(k.Spent), nil
		}
	}
	return 0, fmt.Errorf("the request that measures a request's cost was not charged within 10 s")
}

// The accounting series the webhook line reads.
const (
	alertEvents      = "accounting_alert_events_total"
	webhookAttempts  = "accounting_webhook_attempts_total"
	webhookFailures  = "accounting_webhook_failures_total"
	oldestUndelivery = "accounting_webhook_oldest_undelivered_seconds"
)

// webhookLine says what the delivery worker did between two readings of the metrics.
func webhookLine(a, b map[string]float64) string {
	return fmt.Sprintf("  webhooks to a receiver that never answers, during the gateway run: %.0f alerts generated, %.0f attempts, %.0f failed; oldest undelivered %.0f s",
		grewAll(a, b, alertEvents), delta(a, b, webhookAttempts), delta(a, b, webhookFailures), b[oldestUndelivery])
}
