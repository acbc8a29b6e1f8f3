package tables

// The audit log (migration 0021). Each entry is written in the same decision as its
// change: from the journal's machine.Audited events by the materializer (QueueAudit,
// in the transaction that writes the change), and with a table change made here or by
// the webhooks in that change's transaction (RecordAudit). Nothing else writes it.

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/ledger"
)

var _ ledger.Audit = (*Store)(nil)

// auditInsert appends one entry; its id is the database's, its time the entry's (the
// database's now when it has none).
const auditInsert = `INSERT INTO audit_log (actor, via, action, target, account_id, before, after, at)
VALUES ($1, $2, $3, $4, nullif($5, '')::uuid, $6, $7, coalesce($8, now()))`

// auditArgs are e's values for auditInsert. An account id that is no UUID (none is,
// for a change that was made) is left out rather than fail the change's transaction:
// the materializer would retry it for ever.
func auditArgs(e ledger.AuditEntry) []any {
	var at *time.Time
	if !e.At.IsZero() {
		at = &e.At
	}
	account := e.AccountID
	if !validID(account) {
		account = ""
	}
	return []any{e.Actor, e.Via, e.Action, e.Target, account, nullJSON(e.Before), nullJSON(e.After), at}
}

// QueueAudit queues e's insert in b, sent in the transaction of its change.
func QueueAudit(b *pgx.Batch, e ledger.AuditEntry) { b.Queue(auditInsert, auditArgs(e)...) }

// RecordAudit appends e in tx, the transaction of its change.
func RecordAudit(ctx context.Context, tx pgx.Tx, e ledger.AuditEntry) error {
	_, err := tx.Exec(ctx, auditInsert, auditArgs(e)...)
	return dbError("record audit", err)
}

// Audited runs change in a transaction on pool and, when ctx carries an audit note
// (ledger.TakeAudit), writes its entry from the records change returns (nil: none)
// in the same transaction: both or neither.
func Audited(ctx context.Context, pool *pgxpool.Pool, change func(pgx.Tx) (before, after any, err error)) error {
	note := ledger.TakeAudit(ctx)
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		before, after, err := change(tx)
		if err != nil || note == nil {
			return err
		}
		return RecordAudit(ctx, tx, note.Entry(before, after, time.Time{}))
	})
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
