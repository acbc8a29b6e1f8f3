package ledger

import (
	"context"
	"encoding/json"
	"sync/atomic"
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

// Audit lists the audit log. Nothing writes it but the stores that make the changes,
// each entry in the same decision as its change (AuditNote).
type Audit interface {
	ListAudit(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
}

// AuditNote is the audit entry a change is to be recorded with, carried by the
// context of the call that makes it (WithAudit). The store that makes the change
// takes it (TakeAudit) and records its entry in the same decision as the change: the
// ledger's owner in the journal batch that holds the change's events, a table store
// in the change's SQL transaction. So the log holds an entry exactly when the change
// happened: a crash between the two cannot split them.
type AuditNote struct {
	Actor  string // a person's email, or "admin-token"
	Via    string // "console", "gatewayctl" or "api"
	Action string // as the access table names it
	// Record is a record the store holds (an Account, a Key, a Project, a Tier, a
	// Member, a Webhook) as the audit log shows it: JSON without any secret. Subject
	// is the target and the account of a change whose record after (or, when there is
	// none after, before) is rec; rec nil: what the call itself names.
	Record  func(rec any) json.RawMessage
	Subject func(rec any) (target, account string)

	taken atomic.Bool
}

type auditKey struct{}

// WithAudit returns ctx carrying n: the change made with ctx is recorded with n.
func WithAudit(ctx context.Context, n *AuditNote) context.Context {
	return context.WithValue(ctx, auditKey{}, n)
}

// TakeAudit returns the note ctx carries for the store about to make the change, nil
// when it carries none or another store took it already: one change, one entry.
func TakeAudit(ctx context.Context) *AuditNote {
	n, _ := ctx.Value(auditKey{}).(*AuditNote)
	if n == nil || !n.taken.CompareAndSwap(false, true) {
		return nil
	}
	return n
}

// Taken reports whether a store took n to record it with its change.
func (n *AuditNote) Taken() bool { return n.taken.Load() }

// Entry is n's entry for a change from before to after (records the store holds; nil:
// none), at.
func (n *AuditNote) Entry(before, after any, at time.Time) AuditEntry {
	e := AuditEntry{At: at, Actor: n.Actor, Via: n.Via, Action: n.Action}
	subject := after
	if subject == nil {
		subject = before
	}
	if n.Subject != nil {
		e.Target, e.AccountID = n.Subject(subject)
	}
	if n.Record != nil {
		if before != nil {
			e.Before = n.Record(before)
		}
		if after != nil {
			e.After = n.Record(after)
		}
	}
	return e
}
