package materialize

import (
	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables"
)

// auditWrites are a call's audit entries (machine.Audited), written to audit_log in the
// transaction that writes their changes and moves the stored seq past them: each is
// written exactly once, and never without its change.
type auditWrites struct {
	audits []machine.Audited
}

func (w *auditWrites) addAudit(e machine.Audited) { w.audits = append(w.audits, e) }

// queueAudits inserts the entries in journal order (their ids follow it).
func (w *auditWrites) queueAudits(b *pgx.Batch) {
	for _, e := range w.audits {
		tables.QueueAudit(b, ledger.AuditEntry{At: e.At, Actor: e.Actor, Via: e.Via, Action: e.Action, Target: e.Target,
			AccountID: e.AccountID, Before: e.Before, After: e.After})
	}
}
