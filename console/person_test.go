package console_test

import (
	"context"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/server/servertest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestAccountsForAPerson: an account gets a label when it is created and later, the
// list searches it and shows it with the creation date; the tier is chosen from the
// tiers that exist; a key's allowlist and limits read as words; the statement names
// each charge's key.
func TestAccountsForAPerson(t *testing.T) {
	b, fx := signedInOnDatabase(t)
	_, body := b.get("/accounts")
	csrf := match(t, csrfRE, body)
	tierSelect := regexp.MustCompile(`(?s)<select name="tier" id="new-tier">(.*?)</select>`)
	if got := match(t, tierSelect, body); got != `<option selected>default</option><option>enterprise</option><option>tight</option>` {
		t.Errorf("tier choices %q, want the three built-in tiers, default selected", got)
	}
	if _, body = b.post("/tiers", url.Values{"csrf": {csrf}, "name": {"gold"}, "rpm_before": {"1"}, "rpm_after": {"2"},
		"in_flight": {"3"}, "in_flight_high_cost": {"1"}}); !strings.Contains(body, "Tier saved") {
		t.Fatalf("tier gold: %s", body)
	}
	if _, body = b.get("/accounts"); !strings.Contains(match(t, tierSelect, body), "<option>gold</option>") {
		t.Errorf("a new tier is not offered: %s", body)
	}

	// A label with a line break is refused and creates nothing.
	if _, body = b.post("/accounts", url.Values{"csrf": {csrf}, "tier": {"tight"}, "label": {"a\nb"}}); !strings.Contains(body, "Check the label") {
		t.Errorf("label with a line break: %s", body)
	}
	if strings.Contains(body, `<a href="/accounts/`) {
		t.Errorf("a refused label created an account: %s", body)
	}
	_, body = b.post("/accounts", url.Values{"csrf": {csrf}, "tier": {"gold"}, "label": {"  Acme research "}})
	acc := match(t, regexp.MustCompile(`id="account-id">([^<]+)<`), body)
	for _, want := range []string{`id="account-label">Acme research<`, `<td>gold</td>`, `value="Acme research"`} {
		if !strings.Contains(body, want) {
			t.Errorf("new account page lacks %q: %s", want, body)
		}
	}
	created := match(t, regexp.MustCompile(`id="account-created">([^<]*)<`), body)
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`).MatchString(created) {
		t.Errorf("creation date %q", created)
	}
	b.post("/accounts", url.Values{"csrf": {csrf}, "tier": {"default"}, "label": {"Beta lab"}})
	if _, body = b.post("/accounts/"+acc+"/update", url.Values{"csrf": {csrf}, "label": {"ACME billing"}}); !strings.Contains(body, `id="account-label">ACME billing<`) {
		t.Errorf("label not changed: %s", body)
	}
	_, body = b.get("/accounts?label=acme")
	if !strings.Contains(body, `<td>ACME billing</td><td>`+created+`</td><td>gold</td>`) || strings.Contains(body, "Beta lab") {
		t.Errorf("search by label: %s", body)
	}
	if _, body = b.get("/accounts?label=beta"); strings.Contains(body, acc) || !strings.Contains(body, "Beta lab") {
		t.Errorf("search by another label: %s", body)
	}

	// Keys: settings in words, and by name in the statement.
	ctx := context.Background()
	admin, led := fx.Admin(t, servertest.AdminToken), fx.Ledger(t, servertest.ServiceToken)
	if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: acc, AmountMicros: 10_000_000}); err != nil {
		t.Fatal(err)
	}
	daily := int64(1_000_000)
	named, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: acc, Name: "ci runner",
		AllowedModels: []string{"demo-chat", "demo-claude"}, DailyLimitMicros: &daily})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: acc}); err != nil {
		t.Fatal(err)
	}
	_, body = b.get("/accounts/" + acc)
	for _, want := range []string{
		`<span class="allowlist">demo-chat, demo-claude</span><br><span class="limits">daily 1.000000 credits, monthly none</span><br><span class="expiry">no expiry</span>`,
		`<span class="allowlist">all models</span><br><span class="limits">daily none, monthly none</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("account page lacks %q: %s", want, body)
		}
	}
	res, err := led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: "person-1", KeyId: named.GetKey().GetId(),
		Model: "demo-chat", AmountMicros: 50_000, Pool: accountingv1.Pool_POOL_GENERAL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := led.Commit(ctx, &accountingv1.CommitRequest{ReservationId: res.GetReservationId(), ActualMicros: 20_000,
		Usage: &accountingv1.Usage{InputTokens: 10, OutputTokens: 10}}); err != nil {
		t.Fatal(err)
	}
	if _, body = b.get("/accounts/" + acc + "/statement"); !strings.Contains(body, `<td>ci runner<br><span class="id">`+named.GetKey().GetId()+`</span></td>`) {
		t.Errorf("statement does not name the key: %s", body)
	}
	rows := readCSV(t, b, "/accounts/"+acc+"/statement?format=csv")
	if i := slices.Index(rows[0], "key_name"); i < 0 || rows[1][i] != "ci runner" {
		t.Errorf("statement CSV %v: want key_name ci runner", rows)
	}
}
