package server

import (
	"context"
	"time"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// defaultPage is a listing's page size when the caller asks for none.
const defaultPage = 100

// pageSize reads a requested page size: 0 means defaultPage.
func pageSize(limit int32) (int, error) {
	switch {
	case limit == 0:
		return defaultPage, nil
	case limit < 0 || limit > 1000:
		return 0, invalidArgument("limit must be between 1 and 1000")
	}
	return int(limit), nil
}

// pageOf converts the first limit of rows, which the store was asked for limit+1 of,
// and calls more with the last row converted when the extra row says another page
// follows.
func pageOf[T, P any](rows []T, limit int, conv func(T) P, more func(last T)) []P {
	if len(rows) > limit {
		rows = rows[:limit]
		more(rows[limit-1])
	}
	out := make([]P, 0, len(rows))
	for _, r := range rows {
		out = append(out, conv(r))
	}
	return out
}

// ListAccounts pages through every account, or those whose label contains a text,
// newest first.
func (a *AdminServer) ListAccounts(ctx context.Context, req *accountingv1.ListAccountsRequest) (*accountingv1.ListAccountsResponse, error) {
	limit, err := pageSize(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// One more than asked tells whether a next page exists.
	accs, err := a.s.store.ListAccounts(ctx, ledger.AccountQuery{AfterID: req.GetAfterId(), Limit: limit + 1, Label: req.GetLabel()})
	if err != nil {
		return nil, a.s.fail(ctx, "ListAccounts", err)
	}
	resp := &accountingv1.ListAccountsResponse{}
	resp.Accounts = pageOf(accs, limit, contract.AccountToProto, func(last ledger.Account) { resp.NextAfterId = last.ID })
	return resp, nil
}

// ListKeys returns an account's keys.
func (a *AdminServer) ListKeys(ctx context.Context, req *accountingv1.ListKeysRequest) (*accountingv1.ListKeysResponse, error) {
	if req.GetAccountId() == "" {
		return nil, invalidArgument("account_id is required")
	}
	keys, err := a.s.store.ListKeys(ctx, req.GetAccountId())
	if err != nil {
		return nil, a.s.fail(ctx, "ListKeys", err)
	}
	resp := &accountingv1.ListKeysResponse{}
	for _, k := range keys {
		resp.Keys = append(resp.Keys, contract.KeyToProto(k))
	}
	return resp, nil
}

// UpdateKey changes the settings the request carries.
func (a *AdminServer) UpdateKey(ctx context.Context, req *accountingv1.UpdateKeyRequest) (*accountingv1.UpdateKeyResponse, error) {
	if req.GetKeyId() == "" {
		return nil, invalidArgument("key_id is required")
	}
	u, err := keyUpdateFromProto(req)
	if err != nil {
		return nil, err
	}
	if err := a.updateFits(ctx, u); err != nil {
		return nil, err
	}
	k, err := a.s.store.UpdateKey(ctx, u)
	if err != nil {
		return nil, a.s.fail(ctx, "UpdateKey", err)
	}
	return &accountingv1.UpdateKeyResponse{Key: contract.KeyToProto(k)}, nil
}

// GetUsage sums an account's charges over UTC days.
func (a *AdminServer) GetUsage(ctx context.Context, req *accountingv1.GetUsageRequest) (*accountingv1.GetUsageResponse, error) {
	if req.GetAccountId() == "" {
		return nil, invalidArgument("account_id is required")
	}
	by, ok := contract.UsageGroupFromProto(req.GetGroupBy())
	if !ok {
		return nil, invalidArgument("group_by is not a known grouping")
	}
	now := a.s.now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	from, err := dayFromProto("from_day", req.GetFromDay(), month)
	if err != nil {
		return nil, err
	}
	to, err := dayFromProto("to_day", req.GetToDay(), month.AddDate(0, 1, -1))
	if err != nil {
		return nil, err
	}
	if to.Before(from) {
		return nil, invalidArgument("to_day is before from_day")
	}
	r, err := a.s.store.Usage(ctx, ledger.UsageQuery{AccountID: req.GetAccountId(), KeyID: req.GetKeyId(),
		ProjectID: req.GetProjectId(), From: from, To: to, By: by})
	if err != nil {
		return nil, a.s.fail(ctx, "GetUsage", err)
	}
	resp := &accountingv1.GetUsageResponse{Total: contract.UsageRowToProto(r.Total)}
	for _, row := range r.Rows {
		resp.Rows = append(resp.Rows, contract.UsageRowToProto(row))
	}
	return resp, nil
}

// dayFromProto reads a "YYYY-MM-DD" day, or def when empty.
func dayFromProto(field, s string, def time.Time) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, invalidArgument(field + " must be a day such as 2026-01-31")
	}
	return d, nil
}

// ListLedgerEntries pages through an account's statement, newest first.
func (a *AdminServer) ListLedgerEntries(ctx context.Context, req *accountingv1.ListLedgerEntriesRequest) (*accountingv1.ListLedgerEntriesResponse, error) {
	switch {
	case req.GetAccountId() == "":
		return nil, invalidArgument("account_id is required")
	case req.GetBeforeId() < 0:
		return nil, invalidArgument("before_id must not be negative")
	}
	limit, err := pageSize(req.GetLimit())
	if err != nil {
		return nil, err
	}
	entries, err := a.s.store.LedgerEntries(ctx, req.GetAccountId(), req.GetBeforeId(), limit+1)
	if err != nil {
		return nil, a.s.fail(ctx, "ListLedgerEntries", err)
	}
	resp := &accountingv1.ListLedgerEntriesResponse{}
	resp.Entries = pageOf(entries, limit, contract.EntryToProto, func(last ledger.Entry) { resp.NextBeforeId = last.ID })
	return resp, nil
}

// Reconcile sums every account's charges over UTC days per day, channel and upstream
// model. Both days are required: a reconciliation is always of a stated period.
func (a *AdminServer) Reconcile(ctx context.Context, req *accountingv1.ReconcileRequest) (*accountingv1.ReconcileResponse, error) {
	if req.GetFromDay() == "" || req.GetToDay() == "" {
		return nil, invalidArgument("from_day and to_day are required")
	}
	from, err := dayFromProto("from_day", req.GetFromDay(), time.Time{})
	if err != nil {
		return nil, err
	}
	to, err := dayFromProto("to_day", req.GetToDay(), time.Time{})
	if err != nil {
		return nil, err
	}
	if to.Before(from) {
		return nil, invalidArgument("to_day is before from_day")
	}
	rows, err := a.s.store.Reconcile(ctx, ledger.ReconcileQuery{From: from, To: to})
	if err != nil {
		return nil, a.s.fail(ctx, "Reconcile", err)
	}
	resp := &accountingv1.ReconcileResponse{}
	for _, r := range rows {
		resp.Rows = append(resp.Rows, contract.ReconcileRowToProto(r))
	}
	return resp, nil
}

// ListTiers returns every tier.
func (a *AdminServer) ListTiers(ctx context.Context, _ *accountingv1.ListTiersRequest) (*accountingv1.ListTiersResponse, error) {
	tiers, err := a.s.store.Tiers(ctx)
	if err != nil {
		return nil, a.s.fail(ctx, "ListTiers", err)
	}
	resp := &accountingv1.ListTiersResponse{}
	for _, t := range tiers {
		resp.Tiers = append(resp.Tiers, contract.TierToProto(t))
	}
	return resp, nil
}

// SetTier creates or changes a tier.
func (a *AdminServer) SetTier(ctx context.Context, req *accountingv1.SetTierRequest) (*accountingv1.SetTierResponse, error) {
	if req.GetTier() == nil {
		return nil, invalidArgument("tier is required")
	}
	t, err := a.s.store.PutTier(ctx, contract.TierFromProto(req.GetTier()))
	if err != nil {
		return nil, a.s.fail(ctx, "SetTier", err)
	}
	return &accountingv1.SetTierResponse{Tier: contract.TierToProto(t)}, nil
}
