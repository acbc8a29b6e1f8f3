package engine

import (
	"context"
	"errors"
	"time"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// The audit log of the admin changes the owner decides. A change whose call carries a
// ledger.AuditNote is decided with a machine.Audited event right after its own events,
// in the same batch: the journal holds both or neither, and the materializer writes
// the entry to the audit log from it. A call that changes nothing (a key disabled
// twice) is recorded too, alone; a refused one is not.

// change decides an admin change c, with the audit note its call carries.
func (e *Engine) change(ctx context.Context, c machine.Command) (machine.Answer, error) {
	return e.submit(ctx, c, ledger.TakeAudit(ctx))
}

// audited appends to events the audit event of o's command, decided now with answer
// ans from the record before, when o carries a note and was not refused.
func (e *Engine) audited(o *op, before any, ans machine.Answer, events []machine.Event) []machine.Event {
	if o.audit == nil || ans.Err != nil {
		return events
	}
	en := o.audit.Entry(before, afterOf(o.cmd, ans), e.now())
	ev := machine.Audited{Actor: en.Actor, Via: en.Via, Action: en.Action, Target: en.Target, AccountID: en.AccountID,
		Before: en.Before, After: en.After, At: en.At}
	e.state.Apply(ev)
	return append(events, ev)
}

// recordBefore is the record command c changes, as the state holds it before c is
// decided; nil for a creation or an unknown record.
func (e *Engine) recordBefore(c machine.Command, at time.Time) any {
	var read machine.Command
	switch c := c.(type) {
	case machine.TopUp:
		read = machine.GetAccount{AccountID: c.AccountID}
	case machine.SetAccountSuspended:
		read = machine.GetAccount{AccountID: c.AccountID}
	case machine.UpdateAccount:
		read = machine.GetAccount{AccountID: c.Update.ID}
	case machine.SetKeyDisabled:
		read = machine.GetKey{KeyID: c.KeyID, At: at}
	case machine.RevokeKey:
		read = machine.GetKey{KeyID: c.KeyID, At: at}
	case machine.UpdateKey:
		read = machine.GetKey{KeyID: c.Update.ID, At: at}
	case machine.UpdateProject:
		read = machine.GetProject{ProjectID: c.Update.ID, At: at}
	case machine.DeleteProject:
		read = machine.GetProject{ProjectID: c.ProjectID, At: at}
	case machine.PutTier:
		ans, _ := e.state.Decide(machine.ListTiers{})
		for _, t := range ans.Tiers {
			if t.Name == c.Tier.Name {
				return t
			}
		}
		return nil
	default:
		return nil
	}
	ans, _ := e.state.Decide(read)
	if ans.Err != nil {
		return nil
	}
	return afterOf(c, ans)
}

// afterOf is the record an answer to c carries.
func afterOf(c machine.Command, ans machine.Answer) any {
	switch c.(type) {
	case machine.CreateAccount, machine.TopUp, machine.SetAccountSuspended, machine.UpdateAccount:
		return ans.Account
	case machine.CreateKey, machine.SetKeyDisabled, machine.RevokeKey, machine.UpdateKey:
		return ans.Key
	case machine.CreateProject, machine.UpdateProject, machine.DeleteProject:
		return ans.Project
	case machine.PutTier:
		return ans.Tier
	}
	return nil
}

// ListAudit lists the audit log from the derived tables once they hold every decision
// durable now, so a change made a moment ago shows with its entry.
func (s Store) ListAudit(ctx context.Context, q ledger.AuditQuery) ([]ledger.AuditEntry, error) {
	a, ok := s.Reports.(ledger.Audit)
	if !ok {
		return nil, errNoAudit
	}
	s.waitMaterialized(ctx)
	return a.ListAudit(ctx, q)
}

var errNoAudit = errors.New("the ledger's reports keep no audit log")
