package contract

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// everyWire runs f over every value of a wire enum except UNSPECIFIED (0), so a value
// added to the proto fails the test until this package converts it.
func everyWire[W ~int32](t *testing.T, names map[int32]string, f func(t *testing.T, w W)) {
	t.Helper()
	for v, name := range names {
		if v == 0 {
			continue
		}
		t.Run(name, func(t *testing.T) { f(t, W(v)) })
	}
}

func TestEveryEnumValueRoundTrips(t *testing.T) {
	t.Run("reason", func(t *testing.T) {
		everyWire(t, accountingv1.Reason_name, func(t *testing.T, w accountingv1.Reason) {
			if w == accountingv1.Reason_REASON_NOT_FOUND {
				st, ok := RefusalStatus(ledger.ErrNotFound)
				if !ok || !errors.Is(FromStatus(st), ledger.ErrNotFound) {
					t.Fatalf("ErrNotFound does not round-trip: %v", st)
				}
				return
			}
			d, ok := ReasonFromProto(w)
			if !ok {
				t.Fatalf("no domain reason for %v", w)
			}
			if back, ok := ReasonToProto(d); !ok || back != w {
				t.Fatalf("%v -> %v -> %v", w, d, back)
			}
		})
	})
	t.Run("pool", func(t *testing.T) {
		everyWire(t, accountingv1.Pool_name, func(t *testing.T, w accountingv1.Pool) {
			d, ok := PoolFromProto(w)
			if !ok || PoolToProto(d) != w {
				t.Fatalf("%v -> %v (%v) -> %v", w, d, ok, PoolToProto(d))
			}
		})
	})
	t.Run("state", func(t *testing.T) {
		everyWire(t, accountingv1.ReservationState_name, func(t *testing.T, w accountingv1.ReservationState) {
			d := StateFromProto(w)
			if d == 0 || StateToProto(d) != w {
				t.Fatalf("%v -> %v -> %v", w, d, StateToProto(d))
			}
		})
	})
	t.Run("change", func(t *testing.T) {
		everyWire(t, accountingv1.ChangeKind_name, func(t *testing.T, w accountingv1.ChangeKind) {
			in := &accountingv1.WatchChangesResponse{Kind: w, KeyId: "k", AccountId: "a"}
			out := ChangeToProto(ChangeFromProto(in))
			if out.GetKind() != w || out.GetKeyId() != "k" || out.GetAccountId() != "a" {
				t.Fatalf("%v -> %v", in, out)
			}
		})
	})
	t.Run("usage group", func(t *testing.T) {
		everyWire(t, accountingv1.UsageGroup_name, func(t *testing.T, w accountingv1.UsageGroup) {
			d, ok := UsageGroupFromProto(w)
			if !ok || UsageGroupToProto(d) != w {
				t.Fatalf("%v -> %v (%v) -> %v", w, d, ok, UsageGroupToProto(d))
			}
		})
	})
	t.Run("entry kind", func(t *testing.T) {
		everyWire(t, accountingv1.EntryKind_name, func(t *testing.T, w accountingv1.EntryKind) {
			d := EntryKindFromProto(w)
			if d == "" || EntryKindToProto(d) != w {
				t.Fatalf("%v -> %q -> %v", w, d, EntryKindToProto(d))
			}
		})
	})
}

// TestDefaultsForWhatASideDoesNotKnow: the values with a documented meaning when the
// other side sends nothing or something new.
func TestDefaultsForWhatASideDoesNotKnow(t *testing.T) {
	if g, ok := UsageGroupFromProto(accountingv1.UsageGroup_USAGE_GROUP_UNSPECIFIED); !ok || g != ledger.ByModel {
		t.Errorf("unspecified usage group = %v, %v; want by model", g, ok)
	}
	if _, ok := UsageGroupFromProto(99); ok {
		t.Error("an unknown usage group was accepted")
	}
	if c := ChangeFromProto(&accountingv1.WatchChangesResponse{Kind: 99}); c.Kind != ledger.ChangeReset {
		t.Errorf("an unknown change kind = %v, want a reset", c.Kind)
	}
	if c := ChangeToProto(ledger.Change{Kind: 99}); c.GetKind() != accountingv1.ChangeKind_CHANGE_KIND_RESET {
		t.Errorf("an undescribable change = %v, want a reset", c.GetKind())
	}
	if p := PoolToProto(0); p != accountingv1.Pool_POOL_GENERAL {
		t.Errorf("no pool = %v, want the general pool", p)
	}
	unknown := RefusedStatus(codes.Internal, "x", &accountingv1.Refusal{Reason: 99})
	if err := FromStatus(unknown); !errors.Is(err, unknown) {
		t.Errorf("an unknown reason became %v, want the status as it was", err)
	}
	if _, ok := RefusalStatus(errors.New("boom")); ok {
		t.Error("a plain error became a refusal")
	}
}

// TestRefusalsRoundTrip: every domain refusal survives the status of its own call and
// the OpError an Apply carries, with its retry-after and limit, under its gRPC code.
func TestRefusalsRoundTrip(t *testing.T) {
	wantCode := map[ledger.Reason]codes.Code{
		ledger.ReasonInvalidAPIKey:            codes.Unauthenticated,
		ledger.ReasonAccountSuspended:         codes.PermissionDenied,
		ledger.ReasonInsufficientCredits:      codes.FailedPrecondition,
		ledger.ReasonKeyLimitReached:          codes.ResourceExhausted,
		ledger.ReasonConcurrencyLimitExceeded: codes.ResourceExhausted,
		ledger.ReasonRateLimitExceeded:        codes.ResourceExhausted,
		ledger.ReasonReservationSettled:       codes.FailedPrecondition,
		ledger.ReasonInvalidArgument:          codes.InvalidArgument,
		ledger.ReasonAlreadyExists:            codes.AlreadyExists,
		ledger.ReasonModelNotAllowed:          codes.PermissionDenied,
		ledger.ReasonInUse:                    codes.FailedPrecondition,
	}
	if len(wantCode) != len(refusals.wire) {
		t.Fatalf("the test knows %d reasons, the table %d", len(wantCode), len(refusals.wire))
	}
	for reason, code := range wantCode {
		t.Run(reason.String(), func(t *testing.T) {
			in := &ledger.Refusal{Reason: reason, RetryAfter: 7, Limit: "rpm"}
			var available *ledger.Micros
			if reason == ledger.ReasonInsufficientCredits {
				// 0 is an amount like any other: only nil means the refusing side did not say.
				available = new(ledger.Micros)
				in.Available = available
			}
			st, ok := RefusalStatus(in)
			if !ok {
				t.Fatal("not a refusal status")
			}
			if got := status.Code(st); got != code {
				t.Errorf("code %v, want %v", got, code)
			}
			want := &ledger.Refusal{Reason: reason, RetryAfter: 7, Limit: "rpm", Available: available}
			if diff := cmp.Diff(want, FromStatus(st)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	daily, monthly := ledger.Micros(5), ledger.Micros(0)
	expires := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	for _, g := range []ledger.Grant{
		{KeyID: "k", AccountID: "a", AllowedModels: []string{"m1", "m2"}, DailyLimit: &daily, MonthlyLimit: &monthly,
			ExpiresAt: &expires, AdminCreated: true, Tier: "enterprise", AccountSuspended: true, AccountToppedUp: true,
			EffectiveModels: []string{"m2"}},
		{KeyID: "k", AccountID: "a"},
		{KeyID: "k", AccountID: "a", EffectiveModels: []string{}}, // projects leave no model
	} {
		if diff := cmp.Diff(g, GrantFromProto(GrantToProto(g))); diff != "" {
			t.Errorf("grant (-want +got)\n%s", diff)
		}
	}
	tier := ledger.Tier{Name: "t", RPMBeforeTopUp: 1, RPMAfterTopUp: 2, InFlightGeneral: 3, InFlightHighCost: 4}
	if diff := cmp.Diff(tier, TierFromProto(TierToProto(tier))); diff != "" {
		t.Errorf("tier (-want +got)\n%s", diff)
	}
	for _, u := range []ledger.Usage{
		{InputTokens: 3, OutputTokens: 4, Units: map[string]int64{"images": 2}},
		{InputTokens: 87_000, OutputTokens: 1_000, ServiceTier: "priority", Components: []ledger.Component{
			{Name: "input", Units: 2_000, PricePerMTok: 5_000_000, Amount: 10_000},
			{Name: "cache_read", Units: 80_000, PricePerMTok: 500_000, Amount: 40_000},
		}},
		{},
	} {
		if diff := cmp.Diff(u, UsageFromProto(UsageToProto(u))); diff != "" {
			t.Errorf("usage (-want +got)\n%s", diff)
		}
	}
	components := []ledger.Component{
		{Name: "cache_write_1h", Units: 3_000, PricePerMTok: 6_000_000, Amount: 18_000},
		{Name: "output", Units: 10, PricePerMTok: 15_000_000, Amount: 150},
	}
	for _, e := range []ledger.Entry{
		{ID: 7, Kind: ledger.EntryCharge, Amount: -18_150, CreatedAt: expires, ReservationID: "r", KeyID: "k", Model: "m",
			InputTokens: 3_000, OutputTokens: 10, Channel: "c", UpstreamModel: "u", Components: components, ServiceTier: "flex"},
		{ID: 1, Kind: ledger.EntryTopUp, Amount: 5, CreatedAt: expires},
	} {
		if diff := cmp.Diff(e, EntryFromProto(EntryToProto(e))); diff != "" {
			t.Errorf("entry (-want +got)\n%s", diff)
		}
	}
	row := ledger.UsageRow{Group: "c", UpstreamModel: "u", Requests: 1, InputTokens: 2, OutputTokens: 3, CacheReadTokens: 4,
		CacheWriteTokens: 5, Charged: 6}
	if diff := cmp.Diff(row, UsageRowFromProto(UsageRowToProto(row))); diff != "" {
		t.Errorf("usage row (-want +got)\n%s", diff)
	}
	for _, p := range []ledger.Project{
		{ID: "p", AccountID: "a", ParentID: "q", Name: "n", DailyLimit: &daily, MonthlyLimit: &monthly, Limit: &daily,
			RPM: new(int64), TPM: &daily, Models: []string{"m"}, SpentToday: 1, SpentMonth: 2, Spent: 3, Reserved: 4,
			CreatedAt: expires},
		{ID: "p", AccountID: "a", Name: "n"},
	} {
		if diff := cmp.Diff(p, ProjectFromProto(ProjectToProto(p))); diff != "" {
			t.Errorf("project (-want +got)\n%s", diff)
		}
	}
	rec := ledger.ReconcileRow{Day: "2026-03-14", Channel: "c", UpstreamModel: "u", Requests: 2, Charged: 9,
		Components: []ledger.ComponentTotal{{Name: "input", Units: 4, Amount: 5}, {Name: "output", Units: 6, Amount: 7}}}
	if diff := cmp.Diff(rec, ReconcileRowFromProto(ReconcileRowToProto(rec))); diff != "" {
		t.Errorf("reconcile row (-want +got)\n%s", diff)
	}
}
