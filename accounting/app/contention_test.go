package app_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/app"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestLockedAccountStallsNoOtherAccount holds one account's row lock for 8 s from a
// separate connection (as a stuck transaction would) while another account's
// Reserve+Commit pairs run through the real service on a small pool. The other account's
// calls all succeed within a deadline shorter than the lock (Envoy's 2 s message
// timeout); the locked account's Reserves are refused as a retryable concurrency limit
// while the lock is still held; its Commit fails as Unavailable (no refusal, so extproc
// retries it) and lands exactly once after the lock is gone.
func TestLockedAccountStallsNoOtherAccount(t *testing.T) {
	if engine := os.Getenv(app.EnvLedgerEngine); engine == app.EngineJournal || engine == "" && app.DefaultEngine == app.EngineJournal {
		t.Skip("the journal engine takes no row lock to decide (e2e TestLockedRowDoesNotStallTheLedger)")
	}
	t.Parallel()
	testLockedAccount(t, "--db-max-conns", "4")
}

func testLockedAccount(t *testing.T, flags ...string) {
	ctx := context.Background()
	url := dbWithTier(t, benchTier)
	p := start(t, url, flags...)
	admin := accountingv1.NewAdminServiceClient(dialT(t, p.addr, adminToken))
	led := accountingv1.NewLedgerServiceClient(dialT(t, p.addr, serviceToken))

	newKey := func() (account, key string) {
		a, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{Tier: benchTier.Name})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: a.GetAccount().GetId(), AmountMicros: 1 << 40}); err != nil {
			t.Fatal(err)
		}
		k, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: a.GetAccount().GetId()})
		if err != nil {
			t.Fatal(err)
		}
		return a.GetAccount().GetId(), k.GetKey().GetId()
	}
	hotAccount, hotKey := newKey()
	_, coldKey := newKey()
	reserve := func(ctx context.Context, key, id string) (*accountingv1.ReserveResponse, error) {
		return led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: id, KeyId: key, Model: "demo-chat",
			AmountMicros: 2_000, Pool: accountingv1.Pool_POOL_GENERAL})
	}
	commit := func(ctx context.Context, reservation string) (*accountingv1.CommitResponse, error) {
		return led.Commit(ctx, &accountingv1.CommitRequest{ReservationId: reservation, ActualMicros: 1_500,
			Usage: &accountingv1.Usage{InputTokens: 10, OutputTokens: 20}, UpstreamModel: "up", Channel: "c"})
	}
	held, err := reserve(ctx, hotKey, "hot-before-lock")
	if err != nil {
		t.Fatal(err)
	}

	// The lock: a transaction on its own connection holds the hot account's row.
	lockConn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer lockConn.Close(ctx)
	tx, err := lockConn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, hotAccount); err != nil {
		t.Fatal(err)
	}
	lockedAt := time.Now()
	var released atomic.Bool

	// The locked account's callers: each must be answered while the lock is still held.
	var wg sync.WaitGroup
	hotErrs := make(chan error, 17)
	for i := range 16 {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := reserve(cctx, hotKey, fmt.Sprintf("hot-%d", i))
			if released.Load() {
				err = fmt.Errorf("Reserve on the locked account answered only after the lock was released: %v", err)
			}
			hotErrs <- err
		})
	}
	wg.Go(func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := commit(cctx, held.GetReservationId())
		if released.Load() {
			err = fmt.Errorf("Commit on the locked account answered only after the lock was released: %v", err)
		} else if status.Code(err) != codes.Unavailable || refusalOf(err) != nil {
			err = fmt.Errorf("Commit on the locked account: %v, want Unavailable without a refusal (retried by its owner)", err)
		} else {
			err = nil
		}
		hotErrs <- err
	})

	// The other account: every pair succeeds, each call within Envoy's message timeout.
	var coldFailed atomic.Int64
	var coldWG sync.WaitGroup
	for w := range 8 {
		coldWG.Go(func() {
			for i := range 8 {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				r, err := reserve(cctx, coldKey, fmt.Sprintf("cold-%d-%d", w, i))
				if err == nil {
					_, err = commit(cctx, r.GetReservationId())
				}
				cancel()
				if err != nil {
					coldFailed.Add(1)
					t.Errorf("other account, pair %d/%d: %v", w, i, err)
				}
			}
		})
	}
	coldWG.Wait()
	wg.Wait()
	close(hotErrs)
	for err := range hotErrs {
		if err == nil {
			continue
		}
		r := refusalOf(err)
		if status.Code(err) != codes.ResourceExhausted || r == nil ||
			r.GetReason() != accountingv1.Reason_REASON_CONCURRENCY_LIMIT_EXCEEDED || r.GetRetryAfterSeconds() <= 0 {
			t.Errorf("locked account: %v, want a concurrency refusal with a Retry-After", err)
		}
	}
	if t.Failed() {
		_ = tx.Rollback(ctx)
		t.FailNow()
	}

	time.Sleep(time.Until(lockedAt.Add(8 * time.Second)))
	released.Store(true)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The owner retries the commit (as extproc's settlement does): it lands, once.
	var charged int64
	for attempt := 0; ; attempt++ {
		c, err := commit(ctx, held.GetReservationId())
		if err == nil {
			charged = c.GetChargedMicros()
			break
		}
		if status.Code(err) != codes.Unavailable || attempt > 50 {
			t.Fatalf("commit after the lock: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if charged != 1_500 {
		t.Fatalf("charged %d, want 1500", charged)
	}
	if err := storetest.CheckInvariants(ctx, storetest.NewPool(t, url, 2)); err != nil {
		t.Fatal(err)
	}
}

// refusalOf is the Refusal detail of a status error, or nil.
func refusalOf(err error) *accountingv1.Refusal {
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*accountingv1.Refusal); ok {
			return r
		}
	}
	return nil
}

// dbWithTier is a fresh database (storetest.NewDB) that has tier.
func dbWithTier(t testing.TB, tier ledger.Tier) string {
	t.Helper()
	ctx := context.Background()
	url := storetest.NewDB(t)
	setup, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = setup.PutTier(ctx, tier)
	setup.Close()
	if err != nil {
		t.Fatal(err)
	}
	return url
}
