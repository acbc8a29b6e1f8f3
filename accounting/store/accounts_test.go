package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
)

func TestCreateAndGetAccount(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()

	a, err := f.s.CreateAccount(ctx, ledger.NewAccount{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Tier != "default" || a.Balance != 0 || a.Reserved != 0 || a.Suspended || a.ToppedUp || !a.CreatedAt.Equal(t0) {
		t.Errorf("new account = %+v, want an empty default-tier account created at %v", a, t0)
	}
	if got := f.getAccount(t, a.ID); got != a {
		t.Errorf("GetAccount = %+v, want %+v", got, a)
	}

	tests := []struct {
		name    string
		call    func() error
		wantErr error
	}{
		{"unknown tier", func() error { _, err := f.s.CreateAccount(ctx, ledger.NewAccount{Tier: "platinum"}); return err },
			&ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"unknown account", func() error {
			_, err := f.s.GetAccount(ctx, "00000000-0000-0000-0000-000000000000")
			return err
		}, ledger.ErrNotFound},
		{"malformed account id", func() error { _, err := f.s.GetAccount(ctx, "acct'; --"); return err }, ledger.ErrNotFound},
		{"suspend unknown", func() error {
			_, err := f.s.SetAccountSuspended(ctx, "00000000-0000-0000-0000-000000000000", true)
			return err
		}, ledger.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestTopUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 8)
	ctx := context.Background()
	a := f.account(t, "default", 0)

	tests := []struct {
		name        string
		accountID   string
		amount      ledger.Micros
		key         string
		wantErr     error
		wantBalance ledger.Micros
	}{
		{name: "first", accountID: a.ID, amount: 5_000_000, key: "pay-1", wantBalance: 5_000_000},
		{name: "repeated key adds nothing", accountID: a.ID, amount: 5_000_000, key: "pay-1", wantBalance: 5_000_000},
		{name: "repeated key with another amount adds nothing", accountID: a.ID, amount: 7, key: "pay-1", wantBalance: 5_000_000},
		{name: "another key", accountID: a.ID, amount: 250_000, key: "pay-2", wantBalance: 5_250_000},
		{name: "no key is never deduplicated", accountID: a.ID, amount: 1, wantBalance: 5_250_001},
		{name: "no key again", accountID: a.ID, amount: 1, wantBalance: 5_250_002},
		{name: "zero", accountID: a.ID, amount: 0, wantErr: &ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{name: "negative", accountID: a.ID, amount: -5, wantErr: &ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{name: "overflow", accountID: a.ID, amount: 1<<63 - 1, wantErr: &ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{name: "unknown account", accountID: "00000000-0000-0000-0000-000000000000", amount: 1, wantErr: ledger.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.s.TopUp(ctx, tt.accountID, tt.amount, tt.key)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Balance != tt.wantBalance || !got.ToppedUp {
				t.Errorf("account = %+v, want balance %d and topped up", got, tt.wantBalance)
			}
		})
	}

	// The same idempotency key from many callers at once: added exactly once.
	b := f.account(t, "default", 0)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := f.s.TopUp(ctx, b.ID, 3_000_000, "same"); err != nil {
				t.Errorf("TopUp: %v", err)
			}
		})
	}
	wg.Wait()
	if got := f.getAccount(t, b.ID).Balance; got != 3_000_000 {
		t.Errorf("balance after 20 concurrent top-ups with one key = %d, want 3000000", got)
	}
	f.checkInvariants(t)
}

func TestSetAccountSuspended(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	a := f.account(t, "default", 0)
	for _, want := range []bool{true, true, false} {
		got, err := f.s.SetAccountSuspended(ctx, a.ID, want)
		if err != nil {
			t.Fatal(err)
		}
		if got.Suspended != want || f.getAccount(t, a.ID).Suspended != want {
			t.Errorf("suspended = %v, want %v", got.Suspended, want)
		}
	}
}
