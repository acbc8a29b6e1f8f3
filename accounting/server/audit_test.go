package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestAuditRecordsEveryChange: each change through the AdminService is recorded with
// its actor (the person, or admin-token), how it came, the action, its target and the
// record before and after (never a key's secret); reads and refused calls are not;
// an account's log holds its keys' changes.
func TestAuditRecordsEveryChange(t *testing.T) {
	st, pool := enginetest.NewLedger(t, 4)
	db := tables.New(pool, tables.Options{})
	f := servertest.Start(t, st, servertest.Options{Members: db, Audit: st})
	admin := f.Admin(t, servertest.AdminToken)
	ctx := context.Background()

	acc, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := acc.GetAccount().GetId()
	if _, err := admin.AddMember(ctx, &accountingv1.AddMemberRequest{Email: "bo@example.com", Role: "billing", AccountId: id}); err != nil {
		t.Fatal(err)
	}
	bo := f.Person(t, "bo@example.com")
	if _, err := bo.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: id, AmountMicros: 5_000_000}); err != nil {
		t.Fatal(err)
	}
	if _, err := bo.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: id}); err == nil {
		t.Fatal("billing created a key")
	}
	key, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: id, AmountMicros: 0}); err == nil {
		t.Fatal("a zero top-up was taken")
	}

	log, err := admin.ListAudit(ctx, &accountingv1.ListAuditRequest{AccountId: id})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range log.GetEntries() {
		got = append(got, e.GetActor()+" "+e.GetVia()+" "+e.GetAction()+" "+e.GetTarget())
	}
	want := []string{
		"admin-token api key.create " + key.GetKey().GetId(),
		"bo@example.com console account.topup " + id,
		"admin-token api member.add " + log.GetEntries()[2].GetTarget(),
		"admin-token api account.create " + id,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	topUp := log.GetEntries()[1]
	var before, after struct {
		BalanceMicros string `json:"balance_micros"`
	}
	if err := json.Unmarshal([]byte(topUp.GetBeforeJson()), &before); err != nil {
		t.Fatalf("before %q: %v", topUp.GetBeforeJson(), err)
	}
	if err := json.Unmarshal([]byte(topUp.GetAfterJson()), &after); err != nil {
		t.Fatalf("after %q: %v", topUp.GetAfterJson(), err)
	}
	if after.BalanceMicros != "5000000" || before.BalanceMicros == after.BalanceMicros {
		t.Errorf("top-up before %q after %q", topUp.GetBeforeJson(), topUp.GetAfterJson())
	}
	created := log.GetEntries()[0]
	if created.GetBeforeJson() != "" || !strings.Contains(created.GetAfterJson(), key.GetKey().GetId()) ||
		strings.Contains(created.GetAfterJson(), key.GetSecret()) {
		t.Errorf("key create: before %q after %q", created.GetBeforeJson(), created.GetAfterJson())
	}

	// By actor; and a person may read the log of its scope only.
	mine, err := admin.ListAudit(ctx, &accountingv1.ListAuditRequest{Actor: "BO@example.com"})
	if err != nil || len(mine.GetEntries()) != 1 {
		t.Errorf("by actor: %v %v", mine.GetEntries(), err)
	}
	if _, err := bo.ListAudit(ctx, &accountingv1.ListAuditRequest{AccountId: id}); err != nil {
		t.Errorf("billing reads its account's log: %v", err)
	}
	if _, err := bo.ListAudit(ctx, &accountingv1.ListAuditRequest{}); err == nil {
		t.Error("an account's billing reads the whole log")
	}
	// Paging.
	page, err := admin.ListAudit(ctx, &accountingv1.ListAuditRequest{AccountId: id, Limit: 3})
	if err != nil || len(page.GetEntries()) != 3 || page.GetNextBeforeId() == 0 {
		t.Fatalf("page: %v %v", page, err)
	}
	rest, err := admin.ListAudit(ctx, &accountingv1.ListAuditRequest{AccountId: id, BeforeId: page.GetNextBeforeId()})
	if err != nil || len(rest.GetEntries()) != 1 || rest.GetEntries()[0].GetAction() != "account.create" {
		t.Errorf("next page: %v %v", rest, err)
	}
}
