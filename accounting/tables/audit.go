package tables

// The audit log (migration 0021): a plain table written by accounting's admin API.

import (
	"context"
	"strings"

	"github.com/llmgw/gateway/accounting/ledger"
)

var _ ledger.Audit = (*Store)(nil)

// RecordAudit appends one entry; its id and time are the database's.
func (s *Store) RecordAudit(ctx context.Context, e ledger.AuditEntry) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO audit_log (actor, via, action, target, account_id, before, after)
VALUES ($1, $2, $3, $4, nullif($5, '')::uuid, $6, $7)`, e.Actor, e.Via, e.Action, e.Target, e.AccountID,
		nullJSON(e.Before), nullJSON(e.After))
	return dbError("record audit", err)
}

func nullJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// ListAudit returns entries newest first.
func (s *Store) ListAudit(ctx context.Context, q ledger.AuditQuery) ([]ledger.AuditEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, at, actor, via, action, target, coalesce(account_id::text, ''),
       coalesce(before::text, ''), coalesce(after::text, '')
  FROM audit_log
 WHERE ($1 = '' OR account_id::text = $1) AND ($2 = '' OR actor = $2) AND ($3 = 0 OR id < $3)
 ORDER BY id DESC LIMIT $4`, q.AccountID, strings.ToLower(strings.TrimSpace(q.Actor)), q.BeforeID, q.Limit)
	if err != nil {
		return nil, dbError("list audit", err)
	}
	defer rows.Close()
	out := []ledger.AuditEntry{}
	for rows.Next() {
		var e ledger.AuditEntry
		var before, after string
		if err := rows.Scan(&e.ID, &e.At, &e.Actor, &e.Via, &e.Action, &e.Target, &e.AccountID, &before, &after); err != nil {
			return nil, dbError("list audit", err)
		}
		if before != "" {
			e.Before = []byte(before)
		}
		if after != "" {
			e.After = []byte(after)
		}
		out = append(out, e)
	}
	return out, dbError("list audit", rows.Err())
}
