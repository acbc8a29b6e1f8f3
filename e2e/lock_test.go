package e2e_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/gateway/accounting/tables/tablestest"
)

// TestLockedRowDoesNotStallTheLedger holds an account's row of the derived accounts
// table for 3 s, as an operator's transaction would, while 16 requests of that account
// arrive: the owner decides in memory, so every one is served
// and charged; the derived tables catch up once the lock is gone, and the ledger's
// invariants hold.
func TestLockedRowDoesNotStallTheLedger(t *testing.T) {
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
	if err := tablestest.CheckInvariants(ctx, pool); err != nil {
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
