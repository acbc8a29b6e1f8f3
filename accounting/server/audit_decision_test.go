package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestAuditEntryNeverApartFromItsChange: while the audit log refuses every write (a
// failure between a change and its entry), no change shows without its entry: a
// top-up, decided by the ledger's owner, waits in the journal with its entry and the
// derived tables show neither; a member, written to its table, is not added. Once the
// log takes writes again, the top-up and its one entry are written from the journal.
func TestAuditEntryNeverApartFromItsChange(t *testing.T) {
	st, pool := enginetest.NewLedger(t, 8)
	db := tables.New(pool, tables.Options{})
	f := servertest.Start(t, st, servertest.Options{Members: db, Audit: st})
	admin := f.Admin(t, servertest.AdminToken)
	ctx := context.Background()

	acc, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := acc.GetAccount().GetId()
	counts := func() (topUps, entries int) {
		t.Helper()
		err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM ledger_entries WHERE account_id = $1 AND kind = 'top_up'),
			(SELECT count(*) FROM audit_log WHERE account_id = $1 AND action = 'account.topup')`, id).Scan(&topUps, &entries)
		if err != nil {
			t.Fatal(err)
		}
		return topUps, entries
	}

	if _, err := pool.Exec(ctx, `
		CREATE FUNCTION audit_refused() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'the audit log refuses writes'; END $$;
		CREATE TRIGGER audit_refused BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_refused();`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: id, AmountMicros: 7_000_000}); err != nil {
		t.Fatalf("the top-up is durable in the journal, answered: %v", err)
	}
	// Several materializer passes: none may write the top-up without its entry.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if topUps, entries := counts(); topUps != entries {
			t.Fatalf("the tables show %d top-ups and %d audit entries of them", topUps, entries)
		}
	}
	if _, err := admin.AddMember(ctx, &accountingv1.AddMemberRequest{Email: "cy@example.com", Role: "viewer"}); err == nil {
		t.Error("a member was added while its audit entry could not be written")
	}
	if ms, err := db.MembershipsOf(ctx, "cy@example.com"); err != nil || len(ms) != 0 {
		t.Errorf("memberships without an audit entry: %v %v", ms, err)
	}

	if _, err := pool.Exec(ctx, `DROP TRIGGER audit_refused ON audit_log`); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		topUps, entries := counts()
		if topUps == 1 && entries == 1 {
			break
		}
		if topUps != entries || topUps > 1 || time.Now().After(end) {
			t.Fatalf("after the log recovered: %d top-ups and %d audit entries of them", topUps, entries)
		}
	}
	log, err := admin.ListAudit(ctx, &accountingv1.ListAuditRequest{AccountId: id})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(log.GetEntries()); n != 2 || log.GetEntries()[0].GetAction() != "account.topup" ||
		log.GetEntries()[0].GetActor() != "admin-token" || log.GetEntries()[0].GetVia() != "api" {
		t.Errorf("the account's log: %v", log.GetEntries())
	}
}
