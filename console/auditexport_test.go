package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/server/servertest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestAuditExportDownload: /audit.jsonl downloads every entry the audit page's filters
// select, newest first, one JSON object a line with the fields gatewayctl audit
// export prints, across more than one page of the API; the page links to it with its
// filters; a person refused the whole log is refused the download.
func TestAuditExportDownload(t *testing.T) {
	f := newSSOFixture(t)
	base := f.start()
	admin := f.fx.Admin(t, servertest.AdminToken)
	ctx := context.Background()
	acct, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := acct.GetAccount().GetId()
	const topUps = contract.AuditExportPage + 3
	for i := range topUps {
		if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: id, AmountMicros: 1, IdempotencyKey: fmt.Sprint("t", i)}); err != nil {
			t.Fatal(err)
		}
	}
	f.idp.SignInAs("ada@example.com", true)
	if status, body := f.signIn(base, nil); status != 200 {
		t.Fatalf("sign-in: %d %s", status, body)
	}
	_, body := f.get(base + "/accounts/" + id)
	if status, body := f.post(base+"/accounts/"+id+"/suspend", url.Values{"csrf": {match(t, csrfRE, body)}}); status >= 400 {
		t.Fatalf("suspend: %d %s", status, body)
	}

	lines := func(q string) (*http.Response, []map[string]any) {
		t.Helper()
		resp, body := f.get(base + "/audit.jsonl?" + q)
		if resp.StatusCode != http.StatusOK {
			return resp, nil
		}
		var out []map[string]any
		for i, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
			if line == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("line %d: %v: %s", i+1, err, line)
			}
			if len(m) != 8 || m["id"] == nil || m["at"] == nil || m["actor"] == nil || m["via"] == nil || m["action"] == nil ||
				m["target"] == nil {
				t.Fatalf("line %d fields: %v", i+1, m)
			}
			out = append(out, m)
		}
		return resp, out
	}
	resp, all := lines("account=" + id)
	if resp.StatusCode != http.StatusOK || len(all) != topUps+2 {
		t.Fatalf("download: %d, %d lines, want %d", resp.StatusCode, len(all), topUps+2)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/jsonl") ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("headers: %v", resp.Header)
	}
	if all[0]["actor"] != "ada@example.com" || all[0]["via"] != "console" || all[0]["action"] != "account.suspend" ||
		all[len(all)-1]["action"] != "account.create" {
		t.Errorf("first %v last %v", all[0], all[len(all)-1])
	}
	if _, mine := lines("account=" + id + "&actor=ada@example.com"); len(mine) != 1 {
		t.Errorf("by actor: %v", mine)
	}
	if _, none := lines("actor=nobody@example.com"); len(none) != 0 {
		t.Errorf("nobody's: %v", none)
	}

	// The page links to the download with its filters.
	_, page := f.get(base + "/audit?account=" + id + "&actor=ada@example.com")
	if want := `id="audit-export" href="/audit.jsonl?account=` + id + `&amp;actor=ada%40example.com"`; !strings.Contains(page, want) {
		t.Errorf("audit page without %s:\n%s", want, page)
	}

	// An account's billing may download its account's log, not the whole log.
	if _, err := admin.AddMember(ctx, &accountingv1.AddMemberRequest{Email: "bo@example.com", Role: "billing", AccountId: id}); err != nil {
		t.Fatal(err)
	}
	f.idp.SignInAs("bo@example.com", true)
	if status, body := f.signIn(base, nil); status != 200 {
		t.Fatalf("sign-in: %d %s", status, body)
	}
	if resp, got := lines("account=" + id); resp.StatusCode != http.StatusOK || len(got) != topUps+3 {
		t.Errorf("billing's download of its account: %d, %d lines", resp.StatusCode, len(got))
	}
	if resp, _ := lines(""); resp.StatusCode == http.StatusOK {
		t.Error("billing of one account downloaded the whole log")
	}
}
