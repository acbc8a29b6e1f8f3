package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/console"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestWebhooksPage: the account's webhooks without their secrets, and a one-time
// "send test event" form whose event shows as a delivery row.
func TestWebhooksPage(t *testing.T) {
	b, _, fx := startConsoleFixture(t, console.Options{})
	admin := fx.Admin(t, servertest.AdminToken)
	ctx := context.Background()
	acc, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a := acc.GetAccount().GetId()
	hook, err := admin.CreateWebhook(ctx, &accountingv1.CreateWebhookRequest{AccountId: a, Url: "http://127.0.0.1:9/hook",
		Events: []string{"webhook.test", "key.revoked"}, AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	h := hook.GetWebhook()
	if h.GetSecret() == "" {
		t.Fatal("no secret on creation")
	}

	_, body := b.post("/signin", url.Values{"token": {servertest.AdminToken}})
	csrf := match(t, csrfRE, body)
	if _, body = b.get("/accounts/" + a); !strings.Contains(body, `href="/accounts/`+a+`/webhooks" id="webhooks-link"`) {
		t.Fatalf("no link to the webhooks from the account page: %s", body)
	}
	status, body := b.get("/accounts/" + a + "/webhooks")
	if status != 200 {
		t.Fatalf("webhooks page %d: %s", status, body)
	}
	for _, want := range []string{`<td class="url">http://127.0.0.1:9/hook</td>`, `<td class="events">webhook.test, key.revoked</td>`, "No deliveries yet."} {
		if !strings.Contains(body, want) {
			t.Errorf("webhooks page lacks %q: %s", want, body)
		}
	}
	if strings.Contains(body, h.GetSecret()) || strings.Contains(body, "whsec_") {
		t.Fatal("the webhook's secret is on the page")
	}
	formRE := regexp.MustCompile(`action="/accounts/[^"]+/webhooks/` + h.GetId() + `/test">.*\n<input type="hidden" name="form" value="([0-9a-f]+)"`)
	form := match(t, formRE, body)
	test := "/accounts/" + a + "/webhooks/" + h.GetId() + "/test"

	// Without the CSRF token the button does nothing.
	if status, _ := b.post(test, url.Values{"form": {form}}); status != http.StatusForbidden {
		t.Fatalf("test without CSRF: %d", status)
	}
	_, body = b.post(test, url.Values{"csrf": {csrf}, "form": {form}})
	event := regexp.MustCompile(`id="note">Test event (evt_test_[0-9a-f]+) queued`).FindStringSubmatch(body)
	if event == nil {
		t.Fatalf("no event id shown after the test: %s", body)
	}
	row := regexp.MustCompile(`(?s)<tr id="delivery-` + event[1] + `">(.*?)</tr>`).FindStringSubmatch(body)
	if row == nil {
		t.Fatalf("no delivery row of %s: %s", event[1], body)
	}
	text := strings.Join(strings.Fields(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(row[1], " ")), " ")
	if !regexp.MustCompile(`^` + event[1] + ` webhook\.test 0 not tried yet not delivered \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`).MatchString(text) {
		t.Errorf("delivery row %q", text)
	}
	// The same form again (a double click, a resubmission) sends nothing more.
	_, body = b.post(test, url.Values{"csrf": {csrf}, "form": {form}})
	if !strings.Contains(body, "already submitted") {
		t.Errorf("a second submission of the form: %s", body)
	}
	ds, err := admin.ListWebhookDeliveries(ctx, &accountingv1.ListWebhookDeliveriesRequest{WebhookId: h.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.GetDeliveries()) != 1 || ds.GetDeliveries()[0].GetEventId() != event[1] {
		t.Errorf("deliveries after one test and a resubmission: %v", ds.GetDeliveries())
	}
}
