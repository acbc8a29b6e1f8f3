package server_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/llmgw/gateway/accounting/alerts"
	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// auditChange is one admin change made by every client: call makes it (ids holds what
// earlier changes made) and returns the target its audit entry must name.
type auditChange struct {
	method string // the AdminService method
	action string
	// before and after say whether the entry holds the record before and after.
	before, after bool
	call          func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error)
}

// auditChanges are every change the AdminService makes, in an order where each finds
// what it needs.
var auditChanges = []auditChange{
	{"CreateAccount", "account.create", false, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		r, err := c.CreateAccount(ctx, &accountingv1.CreateAccountRequest{Label: "audited"})
		ids["account"] = r.GetAccount().GetId()
		return ids["account"], err
	}},
	{"UpdateAccount", "account.update", true, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		label := "audited-2"
		_, err := c.UpdateAccount(ctx, &accountingv1.UpdateAccountRequest{AccountId: ids["account"], Label: &label})
		return ids["account"], err
	}},
	{"TopUp", "account.topup", true, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		_, err := c.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: ids["account"], AmountMicros: 1_000_000})
		return ids["account"], err
	}},
	{"SetAccountSuspended", "account.suspend", true, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		_, err := c.SetAccountSuspended(ctx, &accountingv1.SetAccountSuspendedRequest{AccountId: ids["account"], Suspended: true})
		return ids["account"], err
	}},
	{"CreateProject", "project.create", false, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		r, err := c.CreateProject(ctx, &accountingv1.CreateProjectRequest{AccountId: ids["account"], Name: "research"})
		ids["project"] = r.GetProject().GetId()
		return ids["project"], err
	}},
	{"UpdateProject", "project.update", true, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		name := "research-2"
		_, err := c.UpdateProject(ctx, &accountingv1.UpdateProjectRequest{ProjectId: ids["project"], Name: &name})
		return ids["project"], err
	}},
	{"CreateKey", "key.create", false, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		r, err := c.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: ids["account"], Name: "ci"})
		ids["key"] = r.GetKey().GetId()
		return ids["key"], err
	}},
	{"UpdateKey", "key.update", true, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		name := "ci-2"
		_, err := c.UpdateKey(ctx, &accountingv1.UpdateKeyRequest{KeyId: ids["key"], Name: &name})
		return ids["key"], err
	}},
	{"SetKeyDisabled", "key.disable", true, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		_, err := c.SetKeyDisabled(ctx, &accountingv1.SetKeyDisabledRequest{KeyId: ids["key"], Disabled: true})
		return ids["key"], err
	}},
	{"RevokeKey", "key.revoke", true, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		_, err := c.RevokeKey(ctx, &accountingv1.RevokeKeyRequest{KeyId: ids["key"]})
		return ids["key"], err
	}},
	{"DeleteProject", "project.delete", true, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		r, err := c.CreateProject(ctx, &accountingv1.CreateProjectRequest{AccountId: ids["account"], Name: "empty"})
		if err != nil {
			return "", err
		}
		ids["skip"] = "1" // the creation above has its own entry
		_, err = c.DeleteProject(ctx, &accountingv1.DeleteProjectRequest{ProjectId: r.GetProject().GetId()})
		return r.GetProject().GetId(), err
	}},
	{"SetTier", "tier.set", false, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		name := "audited-" + ids["via"]
		_, err := c.SetTier(ctx, &accountingv1.SetTierRequest{Tier: &accountingv1.Tier{Name: name, RpmBeforeTopup: 5,
			RpmAfterTopup: 50, InFlightGeneral: 2, InFlightHighCost: 1}})
		return name, err
	}},
	{"CreateWebhook", "webhook", false, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		r, err := c.CreateWebhook(ctx, &accountingv1.CreateWebhookRequest{AccountId: ids["account"],
			Url: "http://127.0.0.1:9/hook", AllowPrivate: true})
		ids["webhook"] = r.GetWebhook().GetId()
		return ids["webhook"], err
	}},
	{"TestWebhook", "webhook", false, false, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		_, err := c.TestWebhook(ctx, &accountingv1.TestWebhookRequest{WebhookId: ids["webhook"]})
		return ids["webhook"], err
	}},
	{"DeleteWebhook", "webhook", true, false, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		_, err := c.DeleteWebhook(ctx, &accountingv1.DeleteWebhookRequest{WebhookId: ids["webhook"]})
		return ids["webhook"], err
	}},
	{"AddMember", "member.add", false, true, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		r, err := c.AddMember(ctx, &accountingv1.AddMemberRequest{Email: "vi-" + ids["via"] + "@example.com", Role: "viewer",
			AccountId: ids["account"]})
		ids["member"] = r.GetMember().GetId()
		return ids["member"], err
	}},
	{"RemoveMember", "member.remove", true, false, func(ctx context.Context, c accountingv1.AdminServiceClient, ids map[string]string) (string, error) {
		_, err := c.RemoveMember(ctx, &accountingv1.RemoveMemberRequest{MemberId: ids["member"]})
		return ids["member"], err
	}},
}

// TestAuditEveryAdminChangeOnce: every change the AdminService makes, from gatewayctl,
// the console (for a signed-in person) and a plain gRPC client, leaves exactly one
// audit entry with the client's actor and via, the action and its target; and every
// AdminService method is either a read or in the table above.
func TestAuditEveryAdminChangeOnce(t *testing.T) {
	st, pool := enginetest.NewLedger(t, 8)
	db := tables.New(pool, tables.Options{})
	keys, err := alerts.ParseKeys(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32))))
	if err != nil {
		t.Fatal(err)
	}
	f := servertest.Start(t, st, servertest.Options{Members: db, Audit: st, Webhooks: &alerts.Webhooks{Pool: pool, Keys: keys}})
	admin := f.Admin(t, servertest.AdminToken)
	bg := context.Background()
	if _, err := db.AddMember(bg, tables.Member{Email: "ada@example.com", Role: "admin"}); err != nil {
		t.Fatal(err)
	}

	covered := map[string]bool{}
	for _, c := range auditChanges {
		covered[c.method] = true
	}
	for _, m := range accountingv1.AdminService_ServiceDesc.Methods {
		read := strings.HasPrefix(m.MethodName, "List") || strings.HasPrefix(m.MethodName, "Get") ||
			m.MethodName == "Reconcile" || m.MethodName == "CheckAccess"
		if !read && !covered[m.MethodName] {
			t.Errorf("AdminService.%s changes something and is not in the audit table", m.MethodName)
		}
	}

	clients := []struct {
		via, actor string
		c          accountingv1.AdminServiceClient
		ctx        context.Context
	}{
		{"gatewayctl", "admin-token", admin, metadata.AppendToOutgoingContext(bg, client.ViaMetadata, "gatewayctl")},
		{"console", "ada@example.com", f.Person(t, "ada@example.com"), bg},
		{"api", "admin-token", admin, bg},
	}
	newest := func() int64 {
		t.Helper()
		r, err := admin.ListAudit(bg, &accountingv1.ListAuditRequest{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetEntries()) == 0 {
			return 0
		}
		return r.GetEntries()[0].GetId()
	}
	for _, cl := range clients {
		ids := map[string]string{"via": cl.via}
		for _, ch := range auditChanges {
			last := newest()
			target, err := ch.call(cl.ctx, cl.c, ids)
			if err != nil {
				t.Fatalf("%s %s: %v", cl.via, ch.method, err)
			}
			skip := 0
			if ids["skip"] != "" {
				skip, ids["skip"] = 1, ""
			}
			// The newest entries since last: exactly one for this change.
			r, err := admin.ListAudit(bg, &accountingv1.ListAuditRequest{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var since []*accountingv1.AuditEntry
			for _, e := range r.GetEntries() {
				if e.GetId() > last {
					since = append(since, e)
				}
			}
			if len(since) != 1+skip {
				t.Errorf("%s %s: %d audit entries, want %d: %v", cl.via, ch.method, len(since), 1+skip, since)
				continue
			}
			e := since[0]
			if got, want := e.GetActor()+" "+e.GetVia()+" "+e.GetAction()+" "+e.GetTarget(),
				cl.actor+" "+cl.via+" "+ch.action+" "+target; got != want {
				t.Errorf("%s %s: entry %q, want %q", cl.via, ch.method, got, want)
			}
			if (e.GetBeforeJson() != "") != ch.before || (e.GetAfterJson() != "") != ch.after {
				t.Errorf("%s %s: before %q after %q, want before %v after %v", cl.via, ch.method, e.GetBeforeJson(),
					e.GetAfterJson(), ch.before, ch.after)
			}
			if strings.Contains(e.GetAfterJson(), "whsec_") {
				t.Errorf("%s %s: a secret in the entry: %s", cl.via, ch.method, e.GetAfterJson())
			}
		}
	}
}
