package ledger

import (
	"context"
	"encoding/json"
	"time"
)

// AuditEntry is one change made through the admin API: who (Actor: a person's email,
// or "admin-token"), how (Via: "console", "gatewayctl" or "api"), what (Action, as
// the access table names it) on what (Target: an id), and the record before and
// after, as JSON without any secret.
type AuditEntry struct {
	ID        int64
	At        time.Time
	Actor     string
	Via       string
	Action    string
	Target    string
	AccountID string // "" for a change of no account (a tier, an unscoped member)
	Before    json.RawMessage
	After     json.RawMessage
}

// AuditQuery selects entries, newest first: of an account (its projects, keys and
// members included), of an actor, before an id.
type AuditQuery struct {
	AccountID string
	Actor     string
	BeforeID  int64
	Limit     int
}

// Audit keeps the audit log.
type Audit interface {
	RecordAudit(ctx context.Context, e AuditEntry) error
	ListAudit(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
}
