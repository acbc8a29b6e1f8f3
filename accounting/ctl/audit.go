package ctl

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// The audit log: audit list.

var auditCommands = map[string]command{
	"audit list": {flags: map[string]flagKind{"account": stringFlag, "actor": stringFlag, "limit": stringFlag, "before": stringFlag},
		entity: "account", run: auditList},
}

// AuditEntry is the JSON shape of an audit entry: before and after the record as
// the API shows it, or null.
type AuditEntry struct {
	ID     string          `json:"id"`
	At     *string         `json:"at"`
	Actor  string          `json:"actor"`
	Via    string          `json:"via"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

func rawOrNull(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("null")
	}
	return json.RawMessage(s)
}

func auditList(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	req := &accountingv1.ListAuditRequest{AccountId: strings.TrimSpace(p.flags["account"]), Actor: strings.TrimSpace(p.flags["actor"])}
	if p.has("limit") {
		n, err := parseCount(p, "limit")
		if err != nil {
			return nil, err
		}
		req.Limit = n
	}
	if p.has("before") {
		n, err := strconv.ParseInt(strings.TrimSpace(p.flags["before"]), 10, 64)
		if err != nil || n < 1 {
			return nil, usagef("--before wants an entry id, not %q", p.flags["before"])
		}
		req.BeforeId = n
	}
	resp, err := c.ListAudit(ctx, req)
	if err != nil {
		return nil, err
	}
	out := struct {
		Entries    []AuditEntry `json:"entries"`
		NextBefore string       `json:"next_before"`
	}{Entries: []AuditEntry{}}
	if resp.GetNextBeforeId() > 0 {
		out.NextBefore = strconv.FormatInt(resp.GetNextBeforeId(), 10)
	}
	for _, e := range resp.GetEntries() {
		out.Entries = append(out.Entries, AuditEntry{ID: strconv.FormatInt(e.GetId(), 10), At: timeOrNil(e.GetAt()),
			Actor: e.GetActor(), Via: e.GetVia(), Action: e.GetAction(), Target: e.GetTarget(),
			Before: rawOrNull(e.GetBeforeJson()), After: rawOrNull(e.GetAfterJson())})
	}
	return out, nil
}
