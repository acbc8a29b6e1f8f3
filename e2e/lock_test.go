package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/gateway/accounting/app"
	"github.com/llmgw/gateway/accounting/store/storetest"
	"github.com/llmgw/gateway/e2e/internal/harness"
)

// TestLockedAccountAnswers429 holds an account's row in PostgreSQL for 8 s (as an
// operator's transaction or a long top-up would) while 16 requests for that account
// arrive at once and another account keeps sending: every request of the locked account
// is refused with the documented 429 concurrency_limit_exceeded and its Retry-After,
// before Envoy's message timeout could answer for us, and holds nothing; every request
// of the other account is served. The ledger's invariants hold afterwards.
func TestLockedAccountAnswers429(t *testing.T) {
	if harness.LedgerEngine() == app.EngineJournal {
		t.Skip("the journal engine decides in memory: a locked row of the derived accounts table refuses nothing (TestLockedRowDoesNotStallTheLedger)")
	}
	t.Parallel()
	locked := newCustomer(t, customerOpts{topup: "10"})
	// Its tier's requests per minute leave room for what it sends here.
	other := newCustomer(t, customerOpts{tier: "enterprise", topup: "10"})
	// One request each first, so that extproc knows both keys and the lock meets only
	// the reservations.
	for _, c := range []customer{locked, other} {
		if _, err := chatOnce(c.key); err != nil {
			t.Fatalf("before the lock: %v", err)
		}
		c.waitSettled(t)
	}
	before := locked.balance(t)

	ctx := context.Background()
	pool, err := pgxpool.New(ctx, gw.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, locked.account); err != nil {
		t.Fatal(err)
	}
	lockEnds := time.Now().Add(8 * time.Second)

	var wg sync.WaitGroup
	lockedErrs := make([]error, 16)
	for i := range lockedErrs {
		wg.Go(func() {
			start := time.Now()
			_, err := chatOnce(locked.key)
			lockedErrs[i] = lockedRefusal(err, time.Since(start))
		})
	}
	var mu sync.Mutex
	var otherErrs []error
	served := 0
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(lockEnds.Add(-time.Second)) {
				time.Sleep(50 * time.Millisecond)
				_, err := chatOnce(other.key)
				mu.Lock()
				if apiErr := (*openai.Error)(nil); errors.As(err, &apiErr) {
					// Say which refusal it was: a 503 can be the admission budget running
					// out on an overloaded machine as well as a lock that reached another
					// account.
					err = fmt.Errorf("%w: %s", err, apiErr.RawJSON())
				}
				if err != nil {
					otherErrs = append(otherErrs, err)
				} else {
					served++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if time.Now().After(lockEnds) {
		t.Fatal("the requests outlasted the lock")
	}
	time.Sleep(time.Until(lockEnds))
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	for i, err := range lockedErrs {
		if err != nil {
			t.Errorf("locked account, request %d: %v", i, err)
		}
	}
	if len(otherErrs) > 0 {
		t.Errorf("other account: %d of %d requests failed, the first: %v", len(otherErrs), len(otherErrs)+served, otherErrs[0])
	}
	if served == 0 {
		t.Error("the other account sent no request during the lock")
	}
	// The lock gone, the account is served again, and the refusals held and charged
	// nothing.
	if _, err := chatOnce(locked.key); err != nil {
		t.Errorf("after the lock: %v", err)
	}
	acc := locked.waitSettled(t)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE key_id = $1`, locked.keyID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("locked account has %d reservations, want 2 (before and after the lock)", n)
	}
	if got := micros(t, acc, "balance"); got >= before || got < before-1_000_000 {
		t.Errorf("balance %d → %d: want one request's charge", before, got)
	}
	if err := storetest.CheckInvariants(ctx, pool); err != nil {
		t.Errorf("ledger invariants: %v", err)
	}
}

// TestLockedRowDoesNotStallTheLedger holds an account's row of the derived accounts
// table for 3 s, as an operator's transaction would, while 16 requests of that account
// arrive: with the journal engine the owner decides in memory, so every one is served
// and charged; the derived tables catch up once the lock is gone, and the ledger's
// invariants hold.
func TestLockedRowDoesNotStallTheLedger(t *testing.T) {
	if harness.LedgerEngine() != app.EngineJournal {
		t.Skip("the store engine decides under the row's lock (TestLockedAccountAnswers429)")
	}
	t.Parallel()
	locked := newCustomer(t, customerOpts{tier: "enterprise", topup: "10"})
	if _, err := chatOnce(locked.key); err != nil {
		t.Fatalf("before the lock: %v", err)
	}
	before := micros(t, locked.waitSettled(t), "balance")

	ctx := context.Background()
	pool, err := pgxpool.New(ctx, gw.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, locked.account); err != nil {
		t.Fatal(err)
	}
	lockEnds := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { _, errs[i] = chatOnce(locked.key) })
	}
	wg.Wait()
	if time.Now().After(lockEnds) {
		t.Error("the requests waited for the row lock")
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d during the lock: %v", i, err)
		}
	}
	time.Sleep(time.Until(lockEnds))
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	acc := locked.waitSettled(t)
	var charges int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries WHERE key_id = $1 AND kind = 'charge'`, locked.keyID).Scan(&charges); err != nil {
		t.Fatal(err)
	}
	if charges != 17 {
		t.Errorf("%d charges in the statement, want 17", charges)
	}
	if got := micros(t, acc, "balance"); got >= before {
		t.Errorf("balance %d → %d: the requests during the lock were not charged", before, got)
	}
	if err := storetest.CheckInvariants(ctx, pool); err != nil {
		t.Errorf("ledger invariants: %v", err)
	}
}

// chatOnce sends one small chat completion through the OpenAI SDK, without retries.
func chatOnce(key string) (*openai.ChatCompletion, error) {
	client := openaiClient(key)
	return client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:     "demo-chat",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi [[mock:tokens=3]]")},
		MaxTokens: openai.Int(16),
	}, option.WithRequestTimeout(10*time.Second))
}

// lockedRefusal says what is wrong with err, the answer (after took) to a request for a
// locked account: nil when it is the spec's 429 concurrency_limit_exceeded, retryable,
// with Retry-After 5, answered before Envoy's message timeout.
func lockedRefusal(err error, took time.Duration) error {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("got %v, want a 429 concurrency_limit_exceeded", err)
	}
	h := http.Header{}
	if apiErr.Response != nil {
		h = apiErr.Response.Header
	}
	switch {
	case apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "concurrency_limit_exceeded" ||
		apiErr.Type != "rate_limit_error":
		return fmt.Errorf("got %d %s (%s): %s, want 429 concurrency_limit_exceeded", apiErr.StatusCode, apiErr.Code,
			apiErr.Type, apiErr.Message)
	case h.Get("retry-after") != "5" || h.Get("x-should-retry") != "true":
		return fmt.Errorf("Retry-After %q, x-should-retry %q; want 5 and true", h.Get("retry-after"), h.Get("x-should-retry"))
	case took >= 2*time.Second:
		return fmt.Errorf("answered after %v, past Envoy's message timeout", took)
	}
	return nil
}
