package server_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/alerts"
	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestWebhookCallsScopedByItsAccount: an admin scoped to an account may test, list the
// deliveries of and delete its account's webhooks (the console contract: admin covers
// webhooks, and --account scopes the role); another account's webhook answers as one
// that does not exist (404, no hint), and a role without the webhook right is refused.
func TestWebhookCallsScopedByItsAccount(t *testing.T) {
	st, pool := enginetest.NewLedger(t, 4)
	keys, err := alerts.ParseKeys(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32))))
	if err != nil {
		t.Fatal(err)
	}
	f := servertest.Start(t, st, servertest.Options{Members: tables.New(pool, tables.Options{}),
		Webhooks: &alerts.Webhooks{Pool: pool, Keys: keys}})
	admin := f.Admin(t, servertest.AdminToken)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	acc := func() string {
		r, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
		must(err)
		return r.GetAccount().GetId()
	}
	acme, other := acc(), acc()
	hook := func(account string) string {
		r, err := admin.CreateWebhook(ctx, &accountingv1.CreateWebhookRequest{AccountId: account,
			Url: "http://127.0.0.1:1/hook", AllowPrivate: true})
		must(err)
		return r.GetWebhook().GetId()
	}
	mine, theirs, gone := hook(acme), hook(other), hook(acme)
	for _, m := range []*accountingv1.AddMemberRequest{
		{Email: "boss@example.com", Role: "admin", AccountId: acme},
		{Email: "op@example.com", Role: "operator", AccountId: acme},
	} {
		_, err := admin.AddMember(ctx, m)
		must(err)
	}
	test := func(id string) func(accountingv1.AdminServiceClient) error {
		return func(c accountingv1.AdminServiceClient) error {
			_, err := c.TestWebhook(ctx, &accountingv1.TestWebhookRequest{WebhookId: id})
			return err
		}
	}
	deliveries := func(id string) func(accountingv1.AdminServiceClient) error {
		return func(c accountingv1.AdminServiceClient) error {
			_, err := c.ListWebhookDeliveries(ctx, &accountingv1.ListWebhookDeliveriesRequest{WebhookId: id})
			return err
		}
	}
	del := func(id string) func(accountingv1.AdminServiceClient) error {
		return func(c accountingv1.AdminServiceClient) error {
			_, err := c.DeleteWebhook(ctx, &accountingv1.DeleteWebhookRequest{WebhookId: id})
			return err
		}
	}
	for _, tc := range []struct {
		person, what string
		call         func(accountingv1.AdminServiceClient) error
		want         codes.Code
	}{
		{"boss@example.com", "test its webhook", test(mine), codes.OK},
		{"boss@example.com", "its webhook's deliveries", deliveries(mine), codes.OK},
		{"boss@example.com", "delete its webhook", del(gone), codes.OK},
		{"boss@example.com", "test another account's webhook", test(theirs), codes.NotFound},
		{"boss@example.com", "another account's deliveries", deliveries(theirs), codes.NotFound},
		{"boss@example.com", "delete another account's webhook", del(theirs), codes.NotFound},
		{"boss@example.com", "test a deleted webhook", test(gone), codes.NotFound},
		{"op@example.com", "test its account's webhook", test(mine), codes.PermissionDenied},
		{"op@example.com", "test another account's webhook", test(theirs), codes.NotFound},
	} {
		if got := status.Code(tc.call(f.Person(t, tc.person))); got != tc.want {
			t.Errorf("%s: %s: %v, want %v", tc.person, tc.what, got, tc.want)
		}
	}
	// The token keeps every right, the other account's webhook included.
	must(test(theirs)(admin))
}
