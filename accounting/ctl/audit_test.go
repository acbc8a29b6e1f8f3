package ctl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// jsonLines decodes r's stdout as JSON lines: one object a line, each with exactly the
// audit entry's fields.
func jsonLines(t *testing.T, r result) []map[string]any {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var out []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d is not a JSON object: %v\n%s", i+1, err, line)
		}
		if got := strings.Join(keysOf(m), ","); got != "action,actor,after,at,before,id,target,via" {
			t.Fatalf("line %d has fields %s", i+1, got)
		}
		out = append(out, m)
	}
	return out
}

// TestAuditExportCommand: audit export prints every entry the filters select, newest
// first, one JSON object a line, across more than one page of the API.
func TestAuditExportCommand(t *testing.T) {
	st, pool := enginetest.NewLedger(t, 4)
	f := servertest.Start(t, st, servertest.Options{Members: tables.New(pool, tables.Options{}), Audit: st})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr}
	admin := f.Admin(t, servertest.AdminToken)
	ctx := context.Background()

	acct := decode(t, run(t, env, "account", "create"))["id"].(string)
	other := decode(t, run(t, env, "account", "create"))["id"].(string)
	decode(t, run(t, env, "account", "topup", other, "--amount", "1"))
	const topUps = contract.AuditExportPage + 7
	for i := range topUps {
		if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: acct, AmountMicros: 1,
			IdempotencyKey: fmt.Sprint("t", i)}); err != nil {
			t.Fatal(err)
		}
	}

	lines := jsonLines(t, run(t, env, "audit", "export", "--account", acct))
	if len(lines) != topUps+1 {
		t.Fatalf("%d lines, want %d", len(lines), topUps+1)
	}
	last := int64(1 << 62)
	for i, l := range lines {
		id, err := strconv.ParseInt(l["id"].(string), 10, 64)
		if err != nil || id >= last {
			t.Fatalf("line %d: id %v after %d", i+1, l["id"], last)
		}
		last = id
		if l["target"] != acct {
			t.Fatalf("line %d of another target: %v", i+1, l)
		}
	}
	if lines[0]["action"] != "account.topup" || lines[0]["via"] != "api" || lines[len(lines)-1]["action"] != "account.create" ||
		lines[len(lines)-1]["via"] != "gatewayctl" || lines[len(lines)-1]["before"] != nil {
		t.Errorf("first %v, last %v", lines[0], lines[len(lines)-1])
	}
	// The same entries as audit list shows them.
	page := decode(t, run(t, env, "audit", "list", "--account", acct, "--limit", "1"))["entries"].([]any)[0].(map[string]any)
	if fmt.Sprint(page) != fmt.Sprint(lines[0]) {
		t.Errorf("list %v, export %v", page, lines[0])
	}

	// From an entry on; by actor; nothing.
	from := lines[len(lines)-3]["id"].(string)
	if got := jsonLines(t, run(t, env, "audit", "export", "--account", acct, "--before", from)); len(got) != 2 {
		t.Errorf("--before %s: %v", from, got)
	}
	if got := jsonLines(t, run(t, env, "audit", "export", "--account", other)); len(got) != 2 || got[0]["action"] != "account.topup" {
		t.Errorf("the other account: %v", got)
	}
	if r := run(t, env, "audit", "export", "--actor", "nobody@example.com"); r.code != 0 || r.stdout != "" {
		t.Errorf("no entries: %+v", r)
	}
	if r := run(t, env, "audit", "export", "--before", "0"); r.code != 2 {
		t.Errorf("--before 0: %+v", r)
	}
}
