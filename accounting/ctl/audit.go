package ctl

import (
	"context"
	"io"
	"strconv"
	"strings"

	"github.com/llmgw/gateway/accounting/contract"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// The audit log: audit list (one page, one JSON object) and audit export (every
// entry, one JSON object per line).

var auditCommands = map[string]command{
	"audit list": {flags: map[string]flagKind{"account": stringFlag, "actor": stringFlag, "limit": stringFlag, "before": stringFlag},
		entity: "account", run: auditList},
	"audit export": {flags: map[string]flagKind{"account": stringFlag, "actor": stringFlag, "before": stringFlag},
		entity: "account", stream: auditExport},
}

// auditQuery is the request the filters of p select.
func auditQuery(p parsed) (*accountingv1.ListAuditRequest, error) {
	req := &accountingv1.ListAuditRequest{AccountId: strings.TrimSpace(p.flags["account"]), Actor: strings.TrimSpace(p.flags["actor"])}
	if p.has("before") {
		n, err := strconv.ParseInt(strings.TrimSpace(p.flags["before"]), 10, 64)
		if err != nil || n < 1 {
			return nil, usagef("--before wants an entry id, not %q", p.flags["before"])
		}
		req.BeforeId = n
	}
	return req, nil
}

func auditList(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	req, err := auditQuery(p)
	if err != nil {
		return nil, err
	}
	if p.has("limit") {
		n, err := parseCount(p, "limit")
		if err != nil {
			return nil, err
		}
		req.Limit = n
	}
	resp, err := c.ListAudit(ctx, req)
	if err != nil {
		return nil, err
	}
	out := struct {
		Entries    []contract.AuditRecord `json:"entries"`
		NextBefore string                 `json:"next_before"`
	}{Entries: []contract.AuditRecord{}}
	if resp.GetNextBeforeId() > 0 {
		out.NextBefore = strconv.FormatInt(resp.GetNextBeforeId(), 10)
	}
	for _, e := range resp.GetEntries() {
		out.Entries = append(out.Entries, contract.AuditRecordOf(e))
	}
	return out, nil
}

// auditExport writes every entry the filters select, newest first, a page per call
// (each call within callTimeout).
func auditExport(ctx context.Context, c accountingv1.AdminServiceClient, p parsed, w io.Writer) error {
	req, err := auditQuery(p)
	if err != nil {
		return err
	}
	return contract.ExportAudit(req, func(r *accountingv1.ListAuditRequest) (*accountingv1.ListAuditResponse, error) {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return c.ListAudit(ctx, r)
	}, w)
}
