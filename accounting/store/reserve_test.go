package store_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/gateway/accounting/ledger"
)

// secondsUntil is the Retry-After the store must give at now for a window ending at end.
func secondsUntil(now, end time.Time) int {
	return max(1, int(math.Ceil(end.Sub(now).Seconds())))
}

// Each case makes several refusal conditions true at once; the first in the documented
// order must win, carry its window, and change nothing.
func TestReserveRefusalOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 8)
	ctx := context.Background()
	f.tier(t, ledger.Tier{Name: "small", RPMBeforeTopUp: 3, RPMAfterTopUp: 3, InFlightGeneral: 2, InFlightHighCost: 1})

	endOfDay := time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC)
	endOfMonth := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	endOfMinute := time.Date(2026, 3, 14, 12, 1, 0, 0, time.UTC)

	type state struct {
		revoked, disabled, expired, suspended bool
		balance                               ledger.Micros
		daily, monthly                        *ledger.Micros
		heldGeneral, heldHighCost             int // reservations of 1 micro held before the test
		usedRPM                               bool
	}
	tests := []struct {
		name   string
		state  state
		amount ledger.Micros
		pool   ledger.Pool
		want   ledger.Refusal
	}{
		{name: "revoked key first", amount: 100, pool: ledger.PoolGeneral,
			state: state{revoked: true, suspended: true, balance: 2, heldGeneral: 2, usedRPM: true},
			want:  ledger.Refusal{Reason: ledger.ReasonInvalidAPIKey}},
		{name: "disabled key", amount: 100, pool: ledger.PoolGeneral,
			state: state{disabled: true, suspended: true, balance: 1000},
			want:  ledger.Refusal{Reason: ledger.ReasonInvalidAPIKey}},
		{name: "expired key", amount: 100, pool: ledger.PoolGeneral,
			state: state{expired: true, suspended: true, balance: 1000},
			want:  ledger.Refusal{Reason: ledger.ReasonInvalidAPIKey}},
		{name: "suspended before credits", amount: 100, pool: ledger.PoolGeneral,
			state: state{suspended: true, balance: 50, daily: ptr[ledger.Micros](1), heldGeneral: 2},
			want:  ledger.Refusal{Reason: ledger.ReasonAccountSuspended}},
		{name: "credits before key limit", amount: 100, pool: ledger.PoolGeneral,
			state: state{balance: 101, daily: ptr[ledger.Micros](10), heldGeneral: 2, usedRPM: true},
			want:  ledger.Refusal{Reason: ledger.ReasonInsufficientCredits}},
		{name: "daily limit before pools", amount: 100, pool: ledger.PoolGeneral,
			state: state{balance: 1000, daily: ptr[ledger.Micros](99), heldGeneral: 2, usedRPM: true},
			want:  ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "daily", RetryAfter: secondsUntil(t0, endOfDay)}},
		{name: "monthly limit before daily", amount: 100, pool: ledger.PoolGeneral,
			state: state{balance: 1000, daily: ptr[ledger.Micros](50), monthly: ptr[ledger.Micros](50)},
			want:  ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "monthly", RetryAfter: secondsUntil(t0, endOfMonth)}},
		{name: "limit exactly reached is allowed, so the pool refuses", amount: 100, pool: ledger.PoolGeneral,
			state: state{balance: 1000, daily: ptr[ledger.Micros](100), monthly: ptr[ledger.Micros](100), heldGeneral: 2},
			want:  ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded, Limit: "general", RetryAfter: 5}},
		{name: "general pool before rpm", amount: 0, pool: ledger.PoolHighCost,
			state: state{balance: 1000, heldGeneral: 2, usedRPM: true},
			want:  ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded, Limit: "general", RetryAfter: 5}},
		{name: "high-cost pool before rpm", amount: 0, pool: ledger.PoolHighCost,
			state: state{balance: 1000, heldHighCost: 1, usedRPM: true},
			want:  ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded, Limit: "high_cost", RetryAfter: 5}},
		{name: "high-cost pool does not bind general requests, rpm does", amount: 0, pool: ledger.PoolGeneral,
			state: state{balance: 1000, heldHighCost: 1, usedRPM: true},
			want:  ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: "rpm", RetryAfter: secondsUntil(t0, endOfMinute)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.clk.Set(t0)
			a := f.account(t, "small", tt.state.balance)
			k, _ := f.key(t, a.ID, func(nk *ledger.NewKey) {
				nk.DailyLimit, nk.MonthlyLimit = tt.state.daily, tt.state.monthly
				if tt.state.expired {
					nk.ExpiresAt = ptr(t0)
				}
			})
			// Use up the minute's 3 requests and fill the pools, with an unlimited key of
			// the same account: first requests released at once, then the holds.
			filler, _ := f.key(t, a.ID, nil)
			held := tt.state.heldGeneral + tt.state.heldHighCost
			if tt.state.usedRPM {
				for range 3 - held {
					r := f.mustReserve(t, filler.ID, 0, ledger.PoolGeneral)
					must(t, errOf(f.s.Release(ctx, r.ID, "")))
				}
			}
			for range tt.state.heldGeneral {
				f.mustReserve(t, filler.ID, 1, ledger.PoolGeneral)
			}
			for range tt.state.heldHighCost {
				f.mustReserve(t, filler.ID, 1, ledger.PoolHighCost)
			}
			if tt.state.revoked {
				must(t, errOf(f.s.RevokeKey(ctx, k.ID)))
			}
			if tt.state.disabled {
				must(t, errOf(f.s.SetKeyDisabled(ctx, k.ID, true)))
			}
			if tt.state.suspended {
				must(t, errOf(f.s.SetAccountSuspended(ctx, a.ID, true)))
			}
			before := f.getAccount(t, a.ID)
			keyBefore, _ := f.s.GetKey(ctx, k.ID)

			_, err := f.reserve(t, k.ID, tt.amount, tt.pool)
			got := refusal(t, err)
			if diff := cmp.Diff(tt.want, *got, cmp.FilterPath(func(p cmp.Path) bool {
				return p.Last().String() == ".Detail"
			}, cmp.Ignore())); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
			if after := f.getAccount(t, a.ID); after != before {
				t.Errorf("a refusal changed the account: %+v -> %+v", before, after)
			}
			if keyAfter, _ := f.s.GetKey(ctx, k.ID); keyAfter.HeldToday != keyBefore.HeldToday || keyAfter.HeldMonth != keyBefore.HeldMonth {
				t.Errorf("a refusal changed the key's windows")
			}
		})
	}
	f.checkInvariants(t)
}
