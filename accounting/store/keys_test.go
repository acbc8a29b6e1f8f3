package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/gateway/accounting/ledger"
)

func TestCreateKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	a := f.account(t, "default", 0)
	exp := t0.Add(48 * time.Hour)
	k, hash := f.key(t, a.ID, func(nk *ledger.NewKey) {
		nk.Name = "ci"
		nk.AllowedModels = []string{"demo-chat", "demo-free"}
		nk.DailyLimit = ptr[ledger.Micros](1_000_000)
		nk.MonthlyLimit = ptr[ledger.Micros](0)
		nk.ExpiresAt = &exp
		nk.AdminCreated = true
	})
	want := ledger.Key{ID: k.ID, AccountID: a.ID, Name: "ci", Prefix: k.Prefix,
		AllowedModels: []string{"demo-chat", "demo-free"}, DailyLimit: ptr[ledger.Micros](1_000_000),
		MonthlyLimit: ptr[ledger.Micros](0), ExpiresAt: &exp, AdminCreated: true, CreatedAt: t0}
	if diff := cmp.Diff(want, k); diff != "" {
		t.Errorf("CreateKey (-want +got):\n%s", diff)
	}
	got, err := f.s.GetKey(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetKey (-want +got):\n%s", diff)
	}

	otherHash := sha256.Sum256([]byte("other"))
	tests := []struct {
		name    string
		nk      ledger.NewKey
		wantErr error
	}{
		{"unknown account", ledger.NewKey{AccountID: "00000000-0000-0000-0000-000000000000", Hash: otherHash[:]}, ledger.ErrNotFound},
		{"malformed account", ledger.NewKey{AccountID: "nope", Hash: otherHash[:]}, ledger.ErrNotFound},
		{"negative daily limit", ledger.NewKey{AccountID: a.ID, Hash: otherHash[:], DailyLimit: ptr[ledger.Micros](-1)},
			&ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"negative monthly limit", ledger.NewKey{AccountID: a.ID, Hash: otherHash[:], MonthlyLimit: ptr[ledger.Micros](-1)},
			&ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"hash not a sha-256", ledger.NewKey{AccountID: a.ID, Hash: []byte("short")},
			&ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"hash already stored", ledger.NewKey{AccountID: a.ID, Hash: hash},
			&ledger.Refusal{Reason: ledger.ReasonAlreadyExists}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.s.CreateKey(ctx, tt.nk); !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
		})
	}
	if _, err := f.s.GetKey(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("GetKey(unknown) = %v, want ErrNotFound", err)
	}
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	a := f.account(t, "enterprise", 0)
	exp := t0.Add(time.Hour)
	k, hash := f.key(t, a.ID, func(nk *ledger.NewKey) {
		nk.AllowedModels = []string{"demo-chat"}
		nk.DailyLimit = ptr[ledger.Micros](5)
		nk.ExpiresAt = &exp
		nk.AdminCreated = true
	})
	valid := ledger.Grant{KeyID: k.ID, AccountID: a.ID, AllowedModels: []string{"demo-chat"},
		DailyLimit: ptr[ledger.Micros](5), ExpiresAt: &exp, AdminCreated: true, Tier: "enterprise"}
	unknown := sha256.Sum256([]byte("unknown"))

	tests := []struct {
		name    string
		setup   func(t *testing.T)
		hash    []byte
		want    ledger.Grant
		wantErr bool
	}{
		{name: "valid", hash: hash, want: valid},
		{name: "unknown", hash: unknown[:], wantErr: true},
		{name: "not a hash", hash: []byte("x"), wantErr: true},
		{name: "suspended account is reported", hash: hash,
			setup: func(t *testing.T) { must(t, errOf(f.s.SetAccountSuspended(ctx, a.ID, true))) },
			want:  func() ledger.Grant { g := valid; g.AccountSuspended = true; return g }()},
		{name: "topped up is reported", hash: hash,
			setup: func(t *testing.T) {
				must(t, errOf(f.s.SetAccountSuspended(ctx, a.ID, false)))
				must(t, errOf(f.s.TopUp(ctx, a.ID, 10, "")))
			},
			want: func() ledger.Grant { g := valid; g.AccountToppedUp = true; return g }()},
		{name: "disabled", hash: hash, wantErr: true,
			setup: func(t *testing.T) { must(t, errOf(f.s.SetKeyDisabled(ctx, k.ID, true))) }},
		{name: "re-enabled", hash: hash,
			setup: func(t *testing.T) { must(t, errOf(f.s.SetKeyDisabled(ctx, k.ID, false))) },
			want:  func() ledger.Grant { g := valid; g.AccountToppedUp = true; return g }()},
		{name: "expired", hash: hash, wantErr: true,
			setup: func(t *testing.T) { f.clk.Set(exp) }},
		{name: "revoked", hash: hash, wantErr: true,
			setup: func(t *testing.T) {
				f.clk.Set(t0)
				must(t, errOf(f.s.RevokeKey(ctx, k.ID)))
			}},
		{name: "revoked stays revoked when re-enabled", hash: hash, wantErr: true,
			setup: func(t *testing.T) { must(t, errOf(f.s.SetKeyDisabled(ctx, k.ID, false))) }},
	}
	for _, tt := range tests { // in order: each case builds on the state the last left
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup(t)
			}
			got, err := f.s.Authenticate(ctx, tt.hash)
			if tt.wantErr {
				wantReason(t, err, ledger.ReasonInvalidAPIKey)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("grant (-want +got):\n%s", diff)
			}
		})
	}

	// Reserve agrees with Authenticate about a revoked key.
	_, err := f.reserve(t, k.ID, 0, ledger.PoolGeneral)
	wantReason(t, err, ledger.ReasonInvalidAPIKey)
	if got, _ := f.s.GetKey(ctx, k.ID); !got.Revoked {
		t.Errorf("GetKey after revoke = %+v, want revoked", got)
	}
}

func TestGetKeySpend(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	a := f.account(t, "default", 10_000_000)
	k, _ := f.key(t, a.ID, nil)

	// Yesterday (same month): counts in the month only.
	f.clk.Set(t0.Add(-24 * time.Hour))
	old := f.mustReserve(t, k.ID, 400, ledger.PoolGeneral)
	must(t, errOf(f.s.Commit(ctx, ledger.CommitRequest{ReservationID: old.ID, Actual: 300})))
	f.clk.Set(t0)
	r1 := f.mustReserve(t, k.ID, 1000, ledger.PoolGeneral)
	must(t, errOf(f.s.Commit(ctx, ledger.CommitRequest{ReservationID: r1.ID, Actual: 700})))
	f.mustReserve(t, k.ID, 2000, ledger.PoolGeneral) // still held
	r3 := f.mustReserve(t, k.ID, 5000, ledger.PoolGeneral)
	must(t, errOf(f.s.Release(ctx, r3.ID, "client_disconnect")))

	got, err := f.s.GetKey(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.SpentToday != 700 || got.HeldToday != 2000 || got.SpentMonth != 1000 || got.HeldMonth != 2000 {
		t.Errorf("spend = today %d+%d held, month %d+%d held; want 700+2000, 1000+2000",
			got.SpentToday, got.HeldToday, got.SpentMonth, got.HeldMonth)
	}
	// Next month: a fresh window.
	f.clk.Set(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	got, _ = f.s.GetKey(ctx, k.ID)
	if got.SpentToday != 0 || got.HeldToday != 0 || got.SpentMonth != 0 || got.HeldMonth != 0 {
		t.Errorf("spend in a new month = %+v, want zero", got)
	}
	f.checkInvariants(t)
}

// must fails t when err is not nil.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// errOf returns the error of a (value, error) call.
func errOf[T any](_ T, err error) error { return err }
