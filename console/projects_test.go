package console_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/console"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestAccountPageShowsProjects: each project's spend against its limits, its rates,
// models and keys, on the account page.
func TestAccountPageShowsProjects(t *testing.T) {
	b, _, fx := startConsoleFixture(t, console.Options{})
	admin := fx.Admin(t, servertest.AdminToken)
	led := fx.Ledger(t, servertest.ServiceToken)
	ctx := context.Background()
	acc, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a := acc.GetAccount().GetId()
	if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: a, AmountMicros: 10_000_000}); err != nil {
		t.Fatal(err)
	}
	daily := int64(2_000_000)
	rpm := int64(30)
	top, err := admin.CreateProject(ctx, &accountingv1.CreateProjectRequest{AccountId: a, Name: "research",
		DailyLimitMicros: &daily, Rpm: &rpm, Models: []string{"demo-chat", "demo-claude"}})
	if err != nil {
		t.Fatal(err)
	}
	child, err := admin.CreateProject(ctx, &accountingv1.CreateProjectRequest{AccountId: a, Name: "agents", ParentId: top.GetProject().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	key, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: a, ProjectId: child.GetProject().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: "r1", KeyId: key.GetKey().GetId(), Model: "demo-chat",
		AmountMicros: 500_000, Pool: accountingv1.Pool_POOL_GENERAL})
	if err == nil {
		_, err = led.Commit(ctx, &accountingv1.CommitRequest{ReservationId: res.GetReservationId(), ActualMicros: 250_000})
	}
	if err != nil {
		t.Fatal(err)
	}

	b.post("/signin", url.Values{"token": {servertest.AdminToken}})
	status, body := b.get("/accounts/" + a)
	if status != 200 {
		t.Fatalf("account page %d: %s", status, body)
	}
	row := func(id string) string {
		t.Helper()
		m := regexp.MustCompile(`(?s)<tr id="project-` + id + `">(.*?)</tr>`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no row of project %s in %s", id, body)
		}
		return strings.Join(strings.Fields(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], " ")), " ")
	}
	topID, childID, keyID := top.GetProject().GetId(), child.GetProject().GetId(), key.GetKey().GetId()
	if got, want := row(topID), topID+" research 0.250000 / 2.000000 (12%) 0.250000 / none 0.250000 / none 0.000000 30 none demo-chat, demo-claude"; got != want {
		t.Errorf("top project row\n%q, want\n%q", got, want)
	}
	if got, want := row(childID), childID+" agents "+topID+" 0.250000 / none 0.250000 / none 0.250000 / none 0.000000 none none all "+keyID; got != want {
		t.Errorf("child project row\n%q, want\n%q", got, want)
	}
}
