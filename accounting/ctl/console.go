package ctl

import (
	"context"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// parseModels reads a comma-separated allowlist that names at least one model.
func parseModels(list string) ([]string, error) {
	var models []string
	for _, m := range strings.Split(list, ",") {
		if m = strings.TrimSpace(m); m != "" {
			models = append(models, m)
		}
	}
	if len(models) == 0 {
		return nil, usagef("--models lists no model")
	}
	return models, nil
}

// parseLimit reads the credit amount of flag, nil when it is absent.
func parseLimit(p parsed, flag string) (*int64, error) {
	if !p.has(flag) {
		return nil, nil
	}
	v, err := ledger.ParseCredits(p.flags[flag])
	if err != nil {
		return nil, usagef("--%s: %v", flag, err)
	}
	return &v, nil
}

func parseExpires(s string) (*timestamppb.Timestamp, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, usagef("--expires wants an RFC 3339 time such as 2030-01-02T15:04:05Z: %q", s)
	}
	return timestamppb.New(t), nil
}

// parseCount reads a non-negative integer flag.
func parseCount(p parsed, flag string) (int32, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(p.flags[flag]), 10, 32)
	if err != nil || v < 0 {
		return 0, usagef("--%s wants a non-negative whole number, not %q", flag, p.flags[flag])
	}
	return int32(v), nil
}

// exclusive refuses a command line that sets both a value and its opposite.
func exclusive(p parsed, a, b string) error {
	if p.has(a) && p.has(b) {
		return usagef("--%s and --%s exclude each other", a, b)
	}
	return nil
}

// required returns the trimmed value of a flag the command needs.
func required(p parsed, cmd, flag, what string) (string, error) {
	v := strings.TrimSpace(p.flags[flag])
	if v == "" {
		return "", usagef("%s needs --%s %s", cmd, flag, what)
	}
	return v, nil
}

func accountList(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	req := &accountingv1.ListAccountsRequest{AfterId: strings.TrimSpace(p.flags["after"]), Label: p.flags["label"]}
	if p.has("limit") {
		n, err := parseCount(p, "limit")
		if err != nil {
			return nil, err
		}
		req.Limit = n
	}
	resp, err := c.ListAccounts(ctx, req)
	if err != nil {
		return nil, err
	}
	out := AccountList{Accounts: []Account{}, NextAfter: resp.GetNextAfterId()}
	for _, a := range resp.GetAccounts() {
		out.Accounts = append(out.Accounts, accountJSON(a))
	}
	return out, nil
}

func keyList(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	account, err := required(p, "key list", "account", "ID")
	if err != nil {
		return nil, err
	}
	resp, err := c.ListKeys(ctx, &accountingv1.ListKeysRequest{AccountId: account})
	if err != nil {
		return nil, err
	}
	out := KeyList{Keys: []Key{}}
	for _, k := range resp.GetKeys() {
		out.Keys = append(out.Keys, keyJSON(k))
	}
	return out, nil
}

func keyUpdate(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	for _, pair := range [][2]string{{"models", "all-models"}, {"daily-limit", "no-daily-limit"},
		{"monthly-limit", "no-monthly-limit"}, {"expires", "no-expiry"}} {
		if err := exclusive(p, pair[0], pair[1]); err != nil {
			return nil, err
		}
	}
	req := &accountingv1.UpdateKeyRequest{KeyId: p.args[0]}
	if p.has("name") {
		name := p.flags["name"]
		req.Name = &name
	}
	switch {
	case p.has("models"):
		models, err := parseModels(p.flags["models"])
		if err != nil {
			return nil, err
		}
		req.AllowedModels = &accountingv1.ModelList{Models: models}
	case p.flags["all-models"] == "true":
		req.AllowedModels = &accountingv1.ModelList{}
	}
	for _, lim := range []struct {
		flag string
		dst  **accountingv1.LimitUpdate
	}{{"daily-limit", &req.DailyLimit}, {"monthly-limit", &req.MonthlyLimit}} {
		v, err := parseLimit(p, lim.flag)
		if err != nil {
			return nil, err
		}
		if v != nil || p.flags["no-"+lim.flag] == "true" {
			*lim.dst = &accountingv1.LimitUpdate{Micros: v}
		}
	}
	switch {
	case p.has("expires"):
		ts, err := parseExpires(p.flags["expires"])
		if err != nil {
			return nil, err
		}
		req.Expiry = &accountingv1.ExpiryUpdate{ExpiresAt: ts}
	case p.flags["no-expiry"] == "true":
		req.Expiry = &accountingv1.ExpiryUpdate{}
	}
	if err := keyPlacementUpdate(p, req); err != nil {
		return nil, err
	}
	resp, err := c.UpdateKey(ctx, req)
	if err != nil {
		return nil, err
	}
	return keyJSON(resp.GetKey()), nil
}

// accountUpdate changes the settings its flags name and leaves the others.
func accountUpdate(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	req := &accountingv1.UpdateAccountRequest{AccountId: p.args[0]}
	if p.has("label") {
		label := p.flags["label"]
		req.Label = &label
	}
	if err := exclusive(p, "low-balance", "no-low-balance"); err != nil {
		return nil, err
	}
	low, err := parseLimit(p, "low-balance")
	if err != nil {
		return nil, err
	}
	req.LowBalanceMicros, req.ClearLowBalance = low, p.flags["no-low-balance"] == "true"
	if req.Label == nil && low == nil && !req.ClearLowBalance {
		return nil, usagef("account update needs a setting to change: --label L, --low-balance CREDITS or --no-low-balance")
	}
	resp, err := c.UpdateAccount(ctx, req)
	if err != nil {
		return nil, err
	}
	return accountJSON(resp.GetAccount()), nil
}

// groupFields is the JSON name of a usage row's group, per grouping.
var groupFields = map[ledger.UsageGroup]string{ledger.ByModel: "model", ledger.ByKey: "key_id", ledger.ByDay: "day",
	ledger.ByChannel: "channel", ledger.ByProject: "project_id"}

func usage(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	account, err := required(p, "usage", "account", "ID")
	if err != nil {
		return nil, err
	}
	by := "model"
	if p.has("by") {
		by = p.flags["by"]
	}
	group, ok := ledger.UsageGroupNamed(by)
	if !ok {
		return nil, usagef("--by takes model, key, day, channel or project, not %q", by)
	}
	for _, f := range []string{"from", "to"} {
		if _, err := time.Parse(time.DateOnly, p.flags[f]); p.has(f) && err != nil {
			return nil, usagef("--%s wants a UTC day such as 2026-01-31, not %q", f, p.flags[f])
		}
	}
	resp, err := c.GetUsage(ctx, &accountingv1.GetUsageRequest{
		AccountId: account, KeyId: strings.TrimSpace(p.flags["key"]), ProjectId: strings.TrimSpace(p.flags["project"]),
		FromDay: p.flags["from"], ToDay: p.flags["to"], GroupBy: contract.UsageGroupToProto(group),
	})
	if err != nil {
		return nil, err
	}
	out := UsageReport{Rows: []map[string]any{}, Total: usageJSON(contract.UsageRowFromProto(resp.GetTotal()))}
	for _, pr := range resp.GetRows() {
		r := contract.UsageRowFromProto(pr)
		row := usageJSON(r)
		m := map[string]any{
			groupFields[group]: r.Group, "requests": row.Requests, "input_tokens": row.InputTokens,
			"output_tokens": row.OutputTokens, "cache_read_tokens": row.CacheReadTokens,
			"cache_write_tokens": row.CacheWriteTokens, "charged": row.Charged, "charged_micros": row.ChargedMicros,
		}
		if group == ledger.ByChannel {
			m["upstream_model"] = r.UpstreamModel
		}
		out.Rows = append(out.Rows, m)
	}
	return out, nil
}

// reconcile prints every account's charges of a range of UTC days per day, channel and
// upstream model. Both days are required: a reconciliation is of a stated period.
func reconcile(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	var days [2]string
	for i, f := range []string{"from", "to"} {
		v, err := required(p, "reconcile", f, "YYYY-MM-DD")
		if err != nil {
			return nil, err
		}
		if _, err := time.Parse(time.DateOnly, v); err != nil {
			return nil, usagef("--%s wants a UTC day such as 2026-01-31, not %q", f, v)
		}
		days[i] = v
	}
	resp, err := c.Reconcile(ctx, &accountingv1.ReconcileRequest{FromDay: days[0], ToDay: days[1]})
	if err != nil {
		return nil, err
	}
	out := Reconciliation{Rows: []ReconcileRow{}}
	for _, r := range resp.GetRows() {
		out.Rows = append(out.Rows, reconcileJSON(contract.ReconcileRowFromProto(r)))
	}
	return out, nil
}

func ledgerList(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	account, err := required(p, "ledger", "account", "ID")
	if err != nil {
		return nil, err
	}
	req := &accountingv1.ListLedgerEntriesRequest{AccountId: account}
	if p.has("limit") {
		if req.Limit, err = parseCount(p, "limit"); err != nil {
			return nil, err
		}
	}
	if p.has("before") {
		v, err := strconv.ParseInt(strings.TrimSpace(p.flags["before"]), 10, 64)
		if err != nil || v <= 0 {
			return nil, usagef("--before wants an entry id, not %q", p.flags["before"])
		}
		req.BeforeId = v
	}
	resp, err := c.ListLedgerEntries(ctx, req)
	if err != nil {
		return nil, err
	}
	out := Statement{Entries: []Entry{}}
	if n := resp.GetNextBeforeId(); n != 0 {
		out.NextBefore = strconv.FormatInt(n, 10)
	}
	for _, e := range resp.GetEntries() {
		out.Entries = append(out.Entries, entryJSON(contract.EntryFromProto(e)))
	}
	return out, nil
}

func tierList(ctx context.Context, c accountingv1.AdminServiceClient, _ parsed) (any, error) {
	resp, err := c.ListTiers(ctx, &accountingv1.ListTiersRequest{})
	if err != nil {
		return nil, err
	}
	out := TierList{Tiers: []Tier{}}
	for _, t := range resp.GetTiers() {
		out.Tiers = append(out.Tiers, tierJSON(t))
	}
	return out, nil
}

// tierSet creates a tier (every limit given) or changes one (limits not given keep
// their value).
func tierSet(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	tier := &accountingv1.Tier{Name: p.args[0]}
	list, err := c.ListTiers(ctx, &accountingv1.ListTiersRequest{})
	if err != nil {
		return nil, err
	}
	exists := false
	for _, t := range list.GetTiers() {
		if t.GetName() == tier.Name {
			tier, exists = t, true
		}
	}
	for _, f := range []struct {
		flag string
		dst  *int32
	}{{"rpm-before", &tier.RpmBeforeTopup}, {"rpm-after", &tier.RpmAfterTopup},
		{"in-flight", &tier.InFlightGeneral}, {"in-flight-high-cost", &tier.InFlightHighCost}} {
		if !p.has(f.flag) {
			if !exists {
				return nil, usagef("tier set: a new tier needs --%s N", f.flag)
			}
			continue
		}
		if *f.dst, err = parseCount(p, f.flag); err != nil {
			return nil, err
		}
	}
	resp, err := c.SetTier(ctx, &accountingv1.SetTierRequest{Tier: tier})
	if err != nil {
		return nil, err
	}
	return tierJSON(resp.GetTier()), nil
}
