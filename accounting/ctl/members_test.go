package ctl_test

import (
	"testing"

	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables"
)

// TestMemberCommands: member add (a project alone names its account), list (all, or
// an account's) and remove, in the contract's JSON.
func TestMemberCommands(t *testing.T) {
	st, pool := enginetest.NewLedger(t, 4)
	f := servertest.Start(t, st, servertest.Options{Members: tables.New(pool, tables.Options{})})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr}
	fields := []string{"account_id", "created_at", "email", "id", "project_id", "role"}

	acct := decode(t, run(t, env, "account", "create"))["id"].(string)
	other := decode(t, run(t, env, "account", "create"))["id"].(string)
	proj := decode(t, run(t, env, "project", "create", "--account", acct, "--name", "research"))["id"].(string)

	m := decode(t, run(t, env, "member", "add", "--email", "Ana@Example.com", "--role", "member", "--project", proj))
	expect(t, "add", m, map[string]any{"email": "ana@example.com", "role": "member", "account_id": acct, "project_id": proj}, fields)
	again := decode(t, run(t, env, "member", "add", "--email", "ana@example.com", "--role", "member", "--project", proj))
	if again["id"] != m["id"] {
		t.Errorf("added again: %v, want the row there %v", again["id"], m["id"])
	}
	g := decode(t, run(t, env, "member", "add", "--email", "root@example.com", "--role", "admin"))
	expect(t, "add unscoped", g, map[string]any{"account_id": "", "project_id": ""}, fields)
	decode(t, run(t, env, "member", "add", "--email", "v@example.com", "--role", "viewer", "--account", other))

	for _, bad := range [][]string{
		{"member", "add", "--email", "x@example.com", "--role", "member", "--account", acct}, // member needs a project
		{"member", "add", "--email", "x@example.com", "--role", "owner"},
		{"member", "add", "--email", "x@example.com", "--role", "viewer", "--account", other, "--project", proj},
	} {
		if r := run(t, env, bad...); r.code == 0 {
			t.Errorf("%v: %+v", bad, r)
		}
	}
	if r := run(t, env, "member", "add", "--role", "admin"); r.code != 2 {
		t.Errorf("add without --email: %+v", r)
	}

	all := decode(t, run(t, env, "member", "list"))["members"].([]any)
	if len(all) != 3 {
		t.Errorf("list: %v", all)
	}
	mine := decode(t, run(t, env, "member", "list", "--account", acct))["members"].([]any)
	if len(mine) != 1 || mine[0].(map[string]any)["id"] != m["id"] {
		t.Errorf("list --account: %v", mine)
	}
	gone := decode(t, run(t, env, "member", "remove", m["id"].(string)))
	expect(t, "remove", gone, map[string]any{"id": m["id"], "email": "ana@example.com"}, fields)
	if r := run(t, env, "member", "remove", m["id"].(string)); r.code == 0 {
		t.Errorf("removed twice: %+v", r)
	}
	if got := decode(t, run(t, env, "member", "list", "--account", acct))["members"].([]any); len(got) != 0 {
		t.Errorf("after remove: %v", got)
	}
}

// TestAuditListCommand: changes made with gatewayctl are recorded as such, and audit
// list prints them newest first in the contract's JSON, by page.
func TestAuditListCommand(t *testing.T) {
	st, pool := enginetest.NewLedger(t, 4)
	db := tables.New(pool, tables.Options{})
	f := servertest.Start(t, st, servertest.Options{Members: db, Audit: st})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr}

	acct := decode(t, run(t, env, "account", "create"))["id"].(string)
	decode(t, run(t, env, "account", "topup", acct, "--amount", "2"))
	decode(t, run(t, env, "account", "create"))

	out := decode(t, run(t, env, "audit", "list", "--account", acct, "--limit", "1"))
	entries := out["entries"].([]any)
	if len(entries) != 1 || out["next_before"] == "" {
		t.Fatalf("first page: %v", out)
	}
	e := entries[0].(map[string]any)
	expect(t, "entry", e, map[string]any{"actor": "admin-token", "via": "gatewayctl", "action": "account.topup", "target": acct},
		[]string{"action", "actor", "after", "at", "before", "id", "target", "via"})
	if e["before"] == nil || e["after"] == nil {
		t.Errorf("top-up entry without before or after: %v", e)
	}
	rest := decode(t, run(t, env, "audit", "list", "--account", acct, "--before", out["next_before"].(string)))
	if got := rest["entries"].([]any); len(got) != 1 || got[0].(map[string]any)["action"] != "account.create" || rest["next_before"] != "" {
		t.Errorf("next page: %v", rest)
	}
	if all := decode(t, run(t, env, "audit", "list"))["entries"].([]any); len(all) != 3 {
		t.Errorf("whole log: %v", all)
	}
	if r := run(t, env, "audit", "list", "--before", "x"); r.code != 2 {
		t.Errorf("--before x: %+v", r)
	}
}
