package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/engine/codec"
	"github.com/llmgw/gateway/accounting/engine/journal"
	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// balanceNote renders an account as its balance, a target as the account's id.
func balanceNote() *ledger.AuditNote {
	return &ledger.AuditNote{Actor: "ada@example.com", Via: "console", Action: "account.topup",
		Record: func(rec any) json.RawMessage {
			return json.RawMessage(fmt.Sprintf(`{"balance":%d}`, rec.(ledger.Account).Balance))
		},
		Subject: func(rec any) (string, string) {
			a, _ := rec.(ledger.Account)
			return a.ID, a.ID
		}}
}

// TestAuditEventInTheChangesAppend: a change whose call carries an audit note is made
// durable in one journal append with its machine.Audited event right after its own
// events, the record before and after as the owner decided it; a refused change, a
// change without a note and a read leave none, and a read does not take the note.
func TestAuditEventInTheChangesAppend(t *testing.T) {
	j := newMemJournal()
	r := start(t, j, Options{SettleDelay: -1})
	waitOwning(t, r, 5*time.Second)
	ctx := context.Background()
	a, err := r.CreateAccount(ctx, ledger.NewAccount{})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var appends [][]machine.Event
	j.mu.Lock()
	j.appendHook = func(_ int64, recs []journal.Record) error {
		var evs []machine.Event
		for _, rec := range recs {
			ev, err := codec.Decode(rec.Body)
			if err != nil {
				return err
			}
			evs = append(evs, ev)
		}
		mu.Lock()
		appends = append(appends, evs)
		mu.Unlock()
		return nil
	}
	j.mu.Unlock()
	taken := func() [][]machine.Event {
		mu.Lock()
		defer mu.Unlock()
		out := appends
		appends = nil
		return out
	}

	// A read with a note leaves it for the change.
	note := balanceNote()
	noted := ledger.WithAudit(ctx, note)
	if _, err := r.GetAccount(noted, a.ID); err != nil {
		t.Fatal(err)
	}
	if note.Taken() {
		t.Fatal("a read took the audit note")
	}
	if _, err := r.TopUp(noted, a.ID, 3_000_000, ""); err != nil {
		t.Fatal(err)
	}
	got := taken()
	if len(got) != 1 || len(got[0]) != 2 {
		t.Fatalf("appends of a noted top-up: %#v", got)
	}
	if _, ok := got[0][0].(machine.ToppedUp); !ok {
		t.Fatalf("first event %#v, want the top-up", got[0][0])
	}
	au, ok := got[0][1].(machine.Audited)
	if !ok {
		t.Fatalf("second event %#v, want its audit", got[0][1])
	}
	if au.Actor != "ada@example.com" || au.Via != "console" || au.Action != "account.topup" || au.Target != a.ID ||
		au.AccountID != a.ID || string(au.Before) != `{"balance":0}` || string(au.After) != `{"balance":3000000}` {
		t.Errorf("audit event %+v before %s after %s", au, au.Before, au.After)
	}

	// The same note again: taken already, one change one entry.
	if _, err := r.TopUp(noted, a.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	// No note; a refused change with one.
	if _, err := r.TopUp(ctx, a.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.TopUp(ledger.WithAudit(ctx, balanceNote()), "0a000000-0000-4000-8000-00000000dead", 1, ""); err == nil {
		t.Fatal("a top-up of an unknown account")
	}
	for _, evs := range taken() {
		for _, ev := range evs {
			if _, ok := ev.(machine.Audited); ok {
				t.Errorf("an audit event without a note or for a refused change: %+v", ev)
			}
		}
	}
	// A change that changes nothing is recorded, alone.
	if _, err := r.SetAccountSuspended(ledger.WithAudit(ctx, balanceNote()), a.ID, false); err != nil {
		t.Fatal(err)
	}
	if got := taken(); len(got) != 1 || len(got[0]) != 1 {
		t.Fatalf("appends of a noted change of nothing: %#v", got)
	} else if _, ok := got[0][0].(machine.Audited); !ok {
		t.Fatalf("event %#v, want the audit", got[0][0])
	}
}
