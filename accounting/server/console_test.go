package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// An UpdateKeyRequest changes exactly the fields it carries: an absent field keeps its
// value, an empty LimitUpdate or ExpiryUpdate clears it.
func TestUpdateKeyFieldPresence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := servertest.Start(t, servertest.NewMemory(), servertest.Options{})
	admin := f.Admin(t, servertest.AdminToken)
	acc, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	exp := timestamppb.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	daily, monthly := int64(5), int64(9)
	created, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: acc.GetAccount().GetId(), Name: "n",
		AllowedModels: []string{"demo-chat"}, DailyLimitMicros: &daily, MonthlyLimitMicros: &monthly, ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	want := created.GetKey()
	id := want.GetId()
	name, three := "renamed", int64(3)
	for _, step := range []struct {
		name string
		req  *accountingv1.UpdateKeyRequest
		edit func(k *accountingv1.Key)
	}{
		{"nothing", &accountingv1.UpdateKeyRequest{KeyId: id}, func(*accountingv1.Key) {}},
		{"name and daily", &accountingv1.UpdateKeyRequest{KeyId: id, Name: &name, DailyLimit: &accountingv1.LimitUpdate{Micros: &three}},
			func(k *accountingv1.Key) { k.Name, k.DailyLimitMicros = name, &three }},
		{"clear monthly and expiry, every model", &accountingv1.UpdateKeyRequest{KeyId: id, MonthlyLimit: &accountingv1.LimitUpdate{},
			Expiry: &accountingv1.ExpiryUpdate{}, AllowedModels: &accountingv1.ModelList{}},
			func(k *accountingv1.Key) { k.MonthlyLimitMicros, k.ExpiresAt, k.AllowedModels = nil, nil, nil }},
		{"allowlist", &accountingv1.UpdateKeyRequest{KeyId: id, AllowedModels: &accountingv1.ModelList{Models: []string{"a", "b"}}},
			func(k *accountingv1.Key) { k.AllowedModels = []string{"a", "b"} }},
	} {
		resp, err := admin.UpdateKey(ctx, step.req)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		step.edit(want)
		if diff := cmp.Diff(want, resp.GetKey(), protocmp.Transform()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step.name, diff)
		}
	}
	neg := int64(-1)
	for name, req := range map[string]*accountingv1.UpdateKeyRequest{
		"no key":         {},
		"negative daily": {KeyId: id, DailyLimit: &accountingv1.LimitUpdate{Micros: &neg}},
		"negative month": {KeyId: id, MonthlyLimit: &accountingv1.LimitUpdate{Micros: &neg}},
		"empty model":    {KeyId: id, AllowedModels: &accountingv1.ModelList{Models: []string{""}}},
		"bad expiry":     {KeyId: id, Expiry: &accountingv1.ExpiryUpdate{ExpiresAt: &timestamppb.Timestamp{Nanos: -1}}},
	} {
		if _, err := admin.UpdateKey(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if _, err := admin.UpdateKey(ctx, &accountingv1.UpdateKeyRequest{KeyId: "nope", Name: &name}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown key: %v, want NotFound", err)
	}
	got, _ := admin.GetKey(ctx, &accountingv1.GetKeyRequest{KeyId: id})
	if diff := cmp.Diff(want, got.GetKey(), protocmp.Transform()); diff != "" {
		t.Errorf("refused updates changed the key (-want +got):\n%s", diff)
	}
}

// usageStore records the usage query it is asked.
type usageStore struct {
	*servertest.Memory
	got ledger.UsageQuery
}

func (s *usageStore) Usage(_ context.Context, q ledger.UsageQuery) (ledger.UsageReport, error) {
	s.got = q
	return ledger.UsageReport{Rows: []ledger.UsageRow{{Group: "demo-chat", Requests: 2, Charged: 7}}, Total: ledger.UsageRow{Requests: 2, Charged: 7}}, nil
}

func TestGetUsageRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &usageStore{Memory: servertest.NewMemory()}
	now := time.Date(2028, 2, 10, 23, 59, 0, 0, time.UTC)
	admin := servertest.Start(t, st, servertest.Options{Now: func() time.Time { return now }}).Admin(t, servertest.AdminToken)
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }

	resp, err := admin.GetUsage(ctx, &accountingv1.GetUsageRequest{AccountId: "a"})
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.UsageQuery{AccountID: "a", From: day("2028-02-01"), To: day("2028-02-29"), By: ledger.ByModel}
	if diff := cmp.Diff(want, st.got); diff != "" {
		t.Errorf("default query (-want +got):\n%s", diff)
	}
	wantResp := &accountingv1.GetUsageResponse{Rows: []*accountingv1.UsageRow{{Group: "demo-chat", Requests: 2, ChargedMicros: 7}},
		Total: &accountingv1.UsageRow{Requests: 2, ChargedMicros: 7}}
	if diff := cmp.Diff(wantResp, resp, protocmp.Transform()); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}

	if _, err := admin.GetUsage(ctx, &accountingv1.GetUsageRequest{AccountId: "a", KeyId: "k", FromDay: "2027-12-31",
		ToDay: "2028-01-01", GroupBy: accountingv1.UsageGroup_USAGE_GROUP_DAY}); err != nil {
		t.Fatal(err)
	}
	want = ledger.UsageQuery{AccountID: "a", KeyID: "k", From: day("2027-12-31"), To: day("2028-01-01"), By: ledger.ByDay}
	if diff := cmp.Diff(want, st.got); diff != "" {
		t.Errorf("explicit query (-want +got):\n%s", diff)
	}

	for name, req := range map[string]*accountingv1.GetUsageRequest{
		"no account":     {},
		"bad day":        {AccountId: "a", FromDay: "2028-02-30"},
		"reversed range": {AccountId: "a", FromDay: "2028-02-02", ToDay: "2028-02-01"},
		"unknown group":  {AccountId: "a", GroupBy: accountingv1.UsageGroup(42)},
	} {
		if _, err := admin.GetUsage(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
}

func TestListPagesAndTiers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := servertest.Start(t, servertest.NewMemory(), servertest.Options{}).Admin(t, servertest.AdminToken)
	var ids []string
	for range 3 {
		a, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append([]string{a.GetAccount().GetId()}, ids...) // newest first
	}
	var got []string
	after := ""
	for {
		page, err := admin.ListAccounts(ctx, &accountingv1.ListAccountsRequest{Limit: 2, AfterId: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page.GetAccounts() {
			got = append(got, a.GetId())
		}
		if after = page.GetNextAfterId(); after == "" {
			break
		}
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("accounts (-want +got):\n%s", diff)
	}
	for _, limit := range []int32{-1, 1001} {
		if _, err := admin.ListAccounts(ctx, &accountingv1.ListAccountsRequest{Limit: limit}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
	for name, tier := range map[string]*accountingv1.Tier{
		"missing":   nil,
		"negative":  {Name: "x", RpmBeforeTopup: -1},
		"high-cost": {Name: "x", InFlightGeneral: 1, InFlightHighCost: 2},
	} {
		if _, err := admin.SetTier(ctx, &accountingv1.SetTierRequest{Tier: tier}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("SetTier %s: %v, want InvalidArgument", name, err)
		}
	}
	tiers, err := admin.ListTiers(ctx, &accountingv1.ListTiersRequest{})
	if err != nil || len(tiers.GetTiers()) != 3 || tiers.GetTiers()[0].GetName() != "default" {
		t.Errorf("ListTiers = %v, %v", tiers, err)
	}
}

type reconcileStore struct {
	*servertest.Memory
	got ledger.ReconcileQuery
}

func (s *reconcileStore) Reconcile(_ context.Context, q ledger.ReconcileQuery) ([]ledger.ReconcileRow, error) {
	s.got = q
	return []ledger.ReconcileRow{{Day: "2028-02-10", Channel: "c", UpstreamModel: "u", Requests: 2, Charged: 7,
		Components: []ledger.ComponentTotal{{Name: "cache_read", Units: 80, Amount: 8}}}}, nil
}

// Reconcile asks the store for the days requested, across all accounts, and answers
// its rows with each component's totals.
func TestReconcileRange(t *testing.T) {
	t.Parallel()
	st := &reconcileStore{Memory: servertest.NewMemory()}
	admin := servertest.Start(t, st, servertest.Options{}).Admin(t, servertest.AdminToken)
	resp, err := admin.Reconcile(context.Background(), &accountingv1.ReconcileRequest{FromDay: "2028-02-01", ToDay: "2028-02-29"})
	if err != nil {
		t.Fatal(err)
	}
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	if want := (ledger.ReconcileQuery{From: day("2028-02-01"), To: day("2028-02-29")}); st.got != want {
		t.Errorf("query %+v, want %+v", st.got, want)
	}
	want := &accountingv1.ReconcileResponse{Rows: []*accountingv1.ReconcileRow{{Day: "2028-02-10", Channel: "c", UpstreamModel: "u",
		Requests: 2, ChargedMicros: 7, Components: []*accountingv1.ChargeComponent{{Name: "cache_read", Units: 80, AmountMicros: 8}}}}}
	if diff := cmp.Diff(want, resp, protocmp.Transform()); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	// The ledger service's credential is not an admin's.
	if _, err := servertest.Start(t, st, servertest.Options{}).Admin(t, "wrong").Reconcile(context.Background(),
		&accountingv1.ReconcileRequest{FromDay: "2028-02-01", ToDay: "2028-02-29"}); status.Code(err) != codes.Unauthenticated &&
		status.Code(err) != codes.PermissionDenied {
		t.Errorf("a wrong token: %v", err)
	}
}
