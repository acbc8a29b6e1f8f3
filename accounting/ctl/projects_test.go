package ctl_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// projectFields are the fields of project create, show, update and delete: the
// contract's, with the "_micros" twins of the amounts.
var projectFields = []string{"account_id", "created_at", "daily_limit", "daily_limit_micros", "id", "limit",
	"limit_micros", "models", "monthly_limit", "monthly_limit_micros", "name", "parent_id", "reserved",
	"reserved_micros", "rpm", "spent", "spent_micros", "spent_month", "spent_month_micros", "spent_today",
	"spent_today_micros", "tpm"}

// expect checks m's fields against want (json.Number compared as its string) and, when
// fields is set, that m has exactly those.
func expect(t *testing.T, what string, m map[string]any, want map[string]any, fields []string) {
	t.Helper()
	for k, w := range want {
		got := m[k]
		if n, ok := got.(json.Number); ok {
			got = n.String()
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s: %s = %#v, want %#v", what, k, got, w)
		}
	}
	if fields != nil {
		if got := keysOf(m); !reflect.DeepEqual(got, sorted(fields)) {
			t.Errorf("%s: fields = %v, want %v", what, got, sorted(fields))
		}
	}
}

// TestProjectCommands walks the contract's project commands against the journal
// engine: a tree, keys placed and moved, spend and holds counted up the tree, usage by
// and of a project, and deletion refused while the project is in use.
func TestProjectCommands(t *testing.T) {
	st, _ := enginetest.NewLedger(t, 4)
	f := servertest.Start(t, st, servertest.Options{})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr}
	ctx := context.Background()
	led := f.Ledger(t, servertest.ServiceToken)
	ok := func(args ...string) map[string]any {
		t.Helper()
		r := run(t, env, args...)
		if r.stderr != "" {
			t.Errorf("%v: stderr on success: %q", args, r.stderr)
		}
		return decode(t, r)
	}

	acct := ok("account", "create")["id"].(string)
	ok("account", "topup", acct, "--amount", "10")
	top := ok("project", "create", "--account", acct, "--name", "research", "--daily-limit", "1",
		"--monthly-limit", "5", "--limit", "20", "--rpm", "60", "--tpm", "100000", "--models", "demo-chat, demo-claude")
	expect(t, "create", top, map[string]any{"account_id": acct, "parent_id": "", "name": "research",
		"daily_limit": "1", "daily_limit_micros": "1000000", "monthly_limit": "5", "limit": "20", "limit_micros": "20000000",
		"rpm": "60", "tpm": "100000", "models": []any{"demo-chat", "demo-claude"}, "spent_today": "0", "spent": "0",
		"reserved": "0"}, projectFields)
	topID := top["id"].(string)
	child := ok("project", "create", "--account", acct, "--name", "agents", "--parent", topID)
	expect(t, "child", child, map[string]any{"parent_id": topID, "daily_limit": nil, "limit": nil, "rpm": nil,
		"tpm": nil, "models": nil}, projectFields)
	childID := child["id"].(string)

	// Update sets and clears each setting.
	expect(t, "update", ok("project", "update", childID, "--name", "bots", "--limit", "0.5", "--rpm", "7", "--models", "demo-chat"),
		map[string]any{"name": "bots", "limit": "0.5", "rpm": "7", "models": []any{"demo-chat"}, "parent_id": topID}, projectFields)
	expect(t, "clear", ok("project", "update", topID, "--no-daily-limit", "--no-monthly-limit", "--no-limit", "--no-rpm",
		"--no-tpm", "--all-models"), map[string]any{"name": "research", "daily_limit": nil, "monthly_limit": nil,
		"limit": nil, "rpm": nil, "tpm": nil, "models": nil}, projectFields)
	ok("project", "update", topID, "--limit", "3")

	// Keys in projects, with their own rates.
	k1 := ok("key", "create", "--account", acct, "--project", childID, "--rpm", "5", "--tpm", "1000")
	expect(t, "key in a project", k1, map[string]any{"project_id": childID, "rpm": "5", "tpm": "1000"},
		append([]string{"key"}, keyFields...))
	k1ID := k1["id"].(string)
	k2ID := ok("key", "create", "--account", acct)["id"].(string)
	expect(t, "key show", ok("key", "show", k2ID), map[string]any{"project_id": "", "rpm": nil, "tpm": nil}, keyFields)

	// A charge on k1 (in child), then k1 moves to top and is charged again; k2 is in
	// none. A hold of k1 stays in flight.
	charge := func(key, req string, amount int64) {
		t.Helper()
		res, err := led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: req, KeyId: key, Model: "demo-chat",
			AmountMicros: amount, Pool: accountingv1.Pool_POOL_GENERAL})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := led.Commit(ctx, &accountingv1.CommitRequest{ReservationId: res.GetReservationId(), ActualMicros: amount,
			Usage: &accountingv1.Usage{InputTokens: 10, OutputTokens: 5}}); err != nil {
			t.Fatal(err)
		}
	}
	charge(k1ID, "r1", 100_000)
	expect(t, "move", ok("key", "update", k1ID, "--project", topID, "--no-rpm", "--tpm", "2000"),
		map[string]any{"project_id": topID, "rpm": nil, "tpm": "2000"}, keyFields)
	charge(k1ID, "r2", 30_000)
	charge(k2ID, "r3", 7_000)
	if _, err := led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: "r4", KeyId: k1ID, Model: "demo-chat",
		AmountMicros: 2_000, Pool: accountingv1.Pool_POOL_GENERAL}); err != nil {
		t.Fatal(err)
	}
	expect(t, "top spend", ok("project", "show", topID), map[string]any{"spent_today": "0.13", "spent_month": "0.13",
		"spent": "0.13", "spent_micros": "130000", "reserved": "0.002", "limit": "3"}, projectFields)
	expect(t, "child spend", ok("project", "show", childID), map[string]any{"spent": "0.1", "reserved": "0"}, nil)

	list := ok("project", "list", "--account", acct)
	if ps := list["projects"].([]any); len(ps) != 2 || keysOf(list)[0] != "projects" || len(keysOf(list)) != 1 {
		t.Errorf("project list %v", list)
	}
	keys := ok("key", "list", "--account", acct)["keys"].([]any)
	if p := keys[0].(map[string]any)["project_id"]; p != topID && keys[1].(map[string]any)["project_id"] != topID {
		t.Errorf("key list: no key in %s: %v", topID, keys)
	}

	byProject := ok("usage", "--account", acct, "--by", "project")
	wantRows := map[string]string{"": "0.007", topID: "0.03", childID: "0.1"}
	rows := byProject["rows"].([]any)
	for _, r := range rows {
		r := r.(map[string]any)
		if got := r["charged"].(json.Number).String(); wantRows[r["project_id"].(string)] != got {
			t.Errorf("usage by project: row %v, want charged %s", r, wantRows[r["project_id"].(string)])
		}
	}
	if len(rows) != 3 || byProject["total"].(map[string]any)["charged"].(json.Number).String() != "0.137" {
		t.Errorf("usage by project %v", byProject)
	}
	ofTop := ok("usage", "--account", acct, "--project", topID, "--by", "key")
	if total := ofTop["total"].(map[string]any); total["charged"].(json.Number).String() != "0.13" ||
		total["requests"].(json.Number).String() != "2" {
		t.Errorf("usage of the top project and its descendants %v", ofTop)
	}

	// Deletion: refused while in use, saying why; allowed once empty.
	refused := func(id, why string) {
		t.Helper()
		r := run(t, env, "project", "delete", id)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, why) {
			t.Errorf("delete %s in use: exit %d, %q %q, want %q", id, r.code, r.stdout, r.stderr, why)
		}
	}
	refused(topID, "still has 1 keys and 1 child projects")
	expect(t, "delete child", ok("project", "delete", childID), map[string]any{"id": childID, "spent": "0.1"}, projectFields)
	refused(topID, "still has 1 keys and 0 child projects")
	ok("key", "update", k1ID, "--no-project")
	refused(topID, "requests in flight")
	if r := run(t, env, "project", "show", childID); r.code != 1 || r.stderr != "gatewayctl: project not found\n" {
		t.Errorf("show deleted: exit %d, %q", r.code, r.stderr)
	}
}

// TestProjectFailures: the command line's mistakes and the ledger's refusals.
func TestProjectFailures(t *testing.T) {
	mem := servertest.NewMemory()
	f := servertest.Start(t, mem, servertest.Options{})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr}
	id := decode(t, run(t, env, "account", "create"))["id"].(string)
	other := decode(t, run(t, env, "account", "create"))["id"].(string)
	foreign := decode(t, run(t, env, "project", "create", "--account", other, "--name", "x"))["id"].(string)
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"create without account", []string{"project", "create", "--name", "x"}, 2, "needs --account"},
		{"create without name", []string{"project", "create", "--account", id}, 2, "needs --name"},
		{"create bad limit", []string{"project", "create", "--account", id, "--name", "x", "--limit", "x"}, 2, "--limit"},
		{"create zero rpm", []string{"project", "create", "--account", id, "--name", "x", "--rpm", "0"}, 2, "--rpm wants a positive whole number"},
		{"create empty models", []string{"project", "create", "--account", id, "--name", "x", "--models", ","}, 2, "lists no model"},
		{"create under another account's", []string{"project", "create", "--account", id, "--name", "x", "--parent", foreign}, 1, "invalid argument"},
		{"create unknown account", []string{"project", "create", "--account", "acct_nope", "--name", "x"}, 1, "gatewayctl: account not found\n"},
		{"update contradiction", []string{"project", "update", foreign, "--rpm", "3", "--no-rpm"}, 2, "exclude each other"},
		{"update models contradiction", []string{"project", "update", foreign, "--models", "a", "--all-models"}, 2, "exclude each other"},
		{"update not found", []string{"project", "update", "proj_nope", "--name", "y"}, 1, "gatewayctl: project not found\n"},
		{"list without account", []string{"project", "list"}, 2, "needs --account"},
		{"show needs an id", []string{"project", "show"}, 2, "needs exactly one ID"},
		{"key create in another account's project", []string{"key", "create", "--account", id, "--project", foreign}, 1, "invalid argument"},
		{"key create tpm", []string{"key", "create", "--account", id, "--tpm", "-1"}, 2, "--tpm wants a positive whole number"},
		{"key update project contradiction", []string{"key", "update", "k", "--project", foreign, "--no-project"}, 2, "exclude each other"},
		{"key update tpm contradiction", []string{"key", "update", "k", "--tpm", "3", "--no-tpm"}, 2, "exclude each other"},
		{"key update empty project", []string{"key", "update", "k", "--project", " "}, 2, "--no-project"},
		{"project flag of another command", []string{"account", "show", id, "--project", foreign}, 2, "unknown flag --project"},
		{"usage unknown project", []string{"usage", "--account", id, "--project", foreign}, 1, "gatewayctl: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, env, tc.args...)
			if r.code != tc.wantCode || r.stdout != "" || !strings.Contains(r.stderr, tc.wantStderr) {
				t.Errorf("exit %d (want %d), stdout %q, stderr %q (want %q)", r.code, tc.wantCode, r.stdout, r.stderr, tc.wantStderr)
			}
		})
	}
	if keys := decode(t, run(t, env, "key", "list", "--account", id))["keys"].([]any); len(keys) != 0 {
		t.Errorf("a refused key create made a key: %v", keys)
	}
}
