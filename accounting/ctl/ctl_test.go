package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/ctl"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
)

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := ctl.Run(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
	return result{code, out.String(), errb.String()}
}

func decode(t *testing.T, r result) map[string]any {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, r.stdout)
	}
	if dec.More() {
		t.Fatalf("stdout has more than one JSON value:\n%s", r.stdout)
	}
	return m
}

func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var accountFields = []string{"available", "available_micros", "balance", "balance_micros", "created_at", "id",
	"in_flight", "in_flight_high_cost", "reserved", "reserved_micros", "suspended", "tier", "topped_up"}

var keyFields = []string{"account_id", "admin", "created_at", "daily_limit", "daily_limit_micros", "disabled",
	"expires_at", "held_month", "held_month_micros", "held_today", "held_today_micros", "id", "models",
	"monthly_limit", "monthly_limit_micros", "name", "prefix", "project_id", "revoked", "rpm", "spent_month",
	"spent_month_micros", "spent_today", "spent_today_micros", "tpm"}

func TestCommands(t *testing.T) {
	mem := servertest.NewMemory()
	f := servertest.Start(t, mem, servertest.Options{})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr}

	acct := decode(t, run(t, env, "account", "create"))
	id := acct["id"].(string)
	key := decode(t, run(t, env, "key", "create", "--account", id))
	keyID := key["id"].(string)

	tests := []struct {
		name   string
		args   []string
		want   map[string]any // fields that must have these values (json.Number as string)
		fields []string       // the exact set of fields, when set
	}{
		{"account create tier", []string{"account", "create", "--tier", "tight"},
			map[string]any{"tier": "tight", "balance": "0", "suspended": false, "topped_up": false}, accountFields},
		{"topup flag after id", []string{"account", "topup", id, "--amount", "10"},
			map[string]any{"id": id, "balance": "10", "balance_micros": "10000000", "topped_up": true}, accountFields},
		{"topup flag before id, = form", []string{"account", "topup", "--amount=0.000001", id},
			map[string]any{"balance": "10.000001", "available": "10.000001", "available_micros": "10000001"}, nil},
		{"global flag last", []string{"account", "show", id, "--accounting-addr", f.Addr},
			map[string]any{"id": id, "balance": "10.000001", "reserved": "0", "in_flight": "0"}, accountFields},
		{"suspend", []string{"account", "suspend", id}, map[string]any{"suspended": true}, nil},
		{"unsuspend", []string{"account", "unsuspend", id}, map[string]any{"suspended": false}, nil},
		{"key create full", []string{"key", "create", "--account", id, "--name", "ci", "--models", "demo-chat, demo-free",
			"--daily-limit", "1", "--monthly-limit=5.5", "--expires", "2031-02-03T04:05:06Z", "--admin"},
			map[string]any{"account_id": id, "name": "ci", "models": []any{"demo-chat", "demo-free"},
				"daily_limit": "1", "daily_limit_micros": "1000000", "monthly_limit": "5.5", "monthly_limit_micros": "5500000",
				"expires_at": "2031-02-03T04:05:06Z", "admin": true, "disabled": false}, append([]string{"key"}, keyFields...)},
		{"key show", []string{"key", "show", keyID},
			map[string]any{"id": keyID, "models": []any{}, "daily_limit": nil, "expires_at": nil, "admin": false, "spent_today": "0"}, keyFields},
		{"key disable", []string{"key", "disable", keyID}, map[string]any{"disabled": true}, keyFields},
		{"key enable", []string{"key", "enable", keyID}, map[string]any{"disabled": false}, keyFields},
		{"key update some", []string{"key", "update", keyID, "--name", "renamed", "--models", "demo-chat", "--daily-limit", "0.5"},
			map[string]any{"name": "renamed", "models": []any{"demo-chat"}, "daily_limit": "0.5", "daily_limit_micros": "500000",
				"monthly_limit": nil, "expires_at": nil}, keyFields},
		{"key update others", []string{"key", "update", keyID, "--monthly-limit", "2", "--expires", "2031-02-03T04:05:06Z"},
			map[string]any{"name": "renamed", "models": []any{"demo-chat"}, "daily_limit": "0.5", "monthly_limit": "2",
				"expires_at": "2031-02-03T04:05:06Z"}, keyFields},
		{"key update clear", []string{"key", "update", keyID, "--all-models", "--no-daily-limit", "--no-monthly-limit", "--no-expiry"},
			map[string]any{"name": "renamed", "models": []any{}, "daily_limit": nil, "daily_limit_micros": nil,
				"monthly_limit": nil, "expires_at": nil}, keyFields},
		{"account list", []string{"account", "list", "--limit", "1000"}, map[string]any{"next_after": ""}, []string{"accounts", "next_after"}},
		{"key list", []string{"key", "list", "--account", id}, nil, []string{"keys"}},
		{"tier list", []string{"tier", "list"}, nil, []string{"tiers"}},
		{"tier set", []string{"tier", "set", "gold", "--rpm-before", "1", "--rpm-after", "2", "--in-flight", "3", "--in-flight-high-cost", "3"},
			map[string]any{"name": "gold", "rpm_before_topup": "1", "rpm_after_topup": "2", "in_flight_general": "3", "in_flight_high_cost": "3"},
			[]string{"name", "rpm_before_topup", "rpm_after_topup", "in_flight_general", "in_flight_high_cost"}},
		{"tier set keeps what it is not given", []string{"tier", "set", "tight", "--rpm-after", "9"},
			map[string]any{"name": "tight", "rpm_before_topup": "3", "rpm_after_topup": "9", "in_flight_general": "2", "in_flight_high_cost": "1"}, nil},
		{"key revoke", []string{"key", "revoke", keyID}, map[string]any{"revoked": true}, keyFields},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, env, tc.args...)
			if r.stderr != "" {
				t.Errorf("stderr on success: %q", r.stderr)
			}
			m := decode(t, r)
			for k, want := range tc.want {
				got := m[k]
				if n, ok := got.(json.Number); ok {
					got = n.String()
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v, want %#v", k, got, want)
				}
			}
			if tc.fields != nil {
				if got := keysOf(m); !reflect.DeepEqual(got, sorted(tc.fields)) {
					t.Errorf("fields = %v, want %v", got, sorted(tc.fields))
				}
			}
		})
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func TestKeyCreatePrintsTheSecretOnce(t *testing.T) {
	mem := servertest.NewMemory()
	f := servertest.Start(t, mem, servertest.Options{})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken}
	id := decode(t, run(t, env, "--accounting-addr", f.Addr, "account", "create"))["id"].(string)
	k := decode(t, run(t, env, "--accounting-addr", f.Addr, "key", "create", "--account", id))
	secret, _ := k["key"].(string)
	if !strings.HasPrefix(secret, "gw-") || len(secret) < 46 {
		t.Fatalf("key = %q", secret)
	}
	if k["prefix"] != secret[:8] {
		t.Errorf("prefix %v is not the secret's first 8 characters", k["prefix"])
	}
	shown := run(t, env, "--accounting-addr", f.Addr, "key", "show", k["id"].(string))
	if strings.Contains(shown.stdout, secret) || strings.Contains(shown.stdout, `"key"`) {
		t.Errorf("key show prints the secret: %s", shown.stdout)
	}
}

func TestFailures(t *testing.T) {
	mem := servertest.NewMemory()
	f := servertest.Start(t, mem, servertest.Options{})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr}
	id := decode(t, run(t, env, "account", "create"))["id"].(string)

	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"no command", env, nil, 2, "missing command"},
		{"unknown command", env, []string{"account", "delete", id}, 2, `unknown command "account delete"`},
		{"missing id", env, []string{"account", "show"}, 2, "needs exactly one ID"},
		{"extra id", env, []string{"key", "show", "a", "b"}, 2, "needs exactly one ID"},
		{"unknown flag", env, []string{"account", "show", id, "--bogus"}, 2, "unknown flag --bogus"},
		{"flag of another command", env, []string{"account", "show", id, "--amount", "1"}, 2, "unknown flag --amount"},
		{"flag without value", env, []string{"account", "topup", id, "--amount"}, 2, "needs a value"},
		{"topup without amount", env, []string{"account", "topup", id}, 2, "needs --amount"},
		{"topup bad amount", env, []string{"account", "topup", id, "--amount", "1.0000001"}, 2, "more than 6 decimals"},
		{"topup zero", env, []string{"account", "topup", id, "--amount", "0"}, 2, "must be positive"},
		{"topup negative", env, []string{"account", "topup", id, "--amount", "-3"}, 2, "invalid amount"},
		{"key create without account", env, []string{"key", "create", "--name", "x"}, 2, "needs --account"},
		{"key create bad expiry", env, []string{"key", "create", "--account", id, "--expires", "tomorrow"}, 2, "RFC 3339"},
		{"key create bad bool", env, []string{"key", "create", "--account", id, "--admin=yes"}, 2, "true or false"},
		{"key update contradiction", env, []string{"key", "update", "k", "--models", "a", "--all-models"}, 2, "exclude each other"},
		{"key update no-limit value", env, []string{"key", "update", "k", "--no-daily-limit=maybe"}, 2, "true or false"},
		{"key update bad limit", env, []string{"key", "update", "k", "--monthly-limit", "x"}, 2, "--monthly-limit"},
		{"key list without account", env, []string{"key", "list"}, 2, "needs --account"},
		{"usage without account", env, []string{"usage"}, 2, "needs --account"},
		{"usage bad by", env, []string{"usage", "--account", id, "--by", "week"}, 2, "--by takes model, key, day, channel or project"},
		{"usage bad day", env, []string{"usage", "--account", id, "--from", "2026-13-01"}, 2, "--from wants a UTC day"},
		{"ledger without account", env, []string{"ledger"}, 2, "needs --account"},
		{"ledger bad cursor", env, []string{"ledger", "--account", id, "--before", "x"}, 2, "--before wants an entry id"},
		{"account list bad limit", env, []string{"account", "list", "--limit", "-1"}, 2, "non-negative whole number"},
		{"tier set new without limits", env, []string{"tier", "set", "platinum", "--rpm-before", "1"}, 2, "a new tier needs --rpm-after"},
		{"tier set high-cost above general", env, []string{"tier", "set", "tight", "--in-flight-high-cost", "5"}, 1, "invalid argument"},
		{"key update not found", env, []string{"key", "update", "key_nope", "--name", "x"}, 1, "gatewayctl: key not found\n"},
		{"key list not found", env, []string{"key", "list", "--account", "acct_nope"}, 1, "gatewayctl: account not found\n"},
		{"account not found", env, []string{"account", "show", "acct_nope"}, 1, "gatewayctl: account not found\n"},
		{"topup not found", env, []string{"account", "topup", "acct_nope", "--amount", "1"}, 1, "gatewayctl: account not found\n"},
		{"key not found", env, []string{"key", "revoke", "key_nope"}, 1, "gatewayctl: key not found\n"},
		{"key create unknown account", env, []string{"key", "create", "--account", "acct_nope"}, 1, "gatewayctl: account not found\n"},
		{"unknown tier", env, []string{"account", "create", "--tier", "gold"}, 1, "gatewayctl: invalid argument: "},
		{"wrong token", map[string]string{"GATEWAY_ADMIN_TOKEN": "wrong-token-wrong-token", "GATEWAY_ACCOUNTING_ADDR": f.Addr},
			[]string{"account", "show", id}, 1, "refused the admin token"},
		{"service token is not admin", map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.ServiceToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr},
			[]string{"account", "create"}, 1, "refused the admin token"},
		{"nothing listening", map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": "127.0.0.1:1"},
			[]string{"account", "show", id}, 1, "accounting unavailable at 127.0.0.1:1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.env, tc.args...)
			if r.code != tc.wantCode {
				t.Errorf("exit = %d, want %d (stderr %q)", r.code, tc.wantCode, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout on failure: %q", r.stdout)
			}
			if !strings.Contains(r.stderr, tc.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", r.stderr, tc.wantStderr)
			}
			if !strings.HasPrefix(r.stderr, "gatewayctl: ") {
				t.Errorf("stderr does not start with the program name: %q", r.stderr)
			}
		})
	}
}

func TestAdminTokenSources(t *testing.T) {
	mem := servertest.NewMemory()
	f := servertest.Start(t, mem, servertest.Options{})
	dir := t.TempDir()
	t.Chdir(dir)
	tokenFile := filepath.Join(dir, "admin.tok")
	if err := os.WriteFile(tokenFile, []byte(servertest.AdminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := []string{"--accounting-addr", f.Addr}

	// No source at all.
	r := run(t, nil, append(addr, "account", "create")...)
	if r.code != 1 || !strings.Contains(r.stderr, "no admin token") {
		t.Fatalf("without a token: %+v", r)
	}
	// The flag's file.
	decode(t, run(t, nil, append(addr, "--admin-token-file", tokenFile, "account", "create")...))
	// The environment.
	decode(t, run(t, map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken}, append(addr, "account", "create")...))
	// The flag's file wins over the environment.
	decode(t, run(t, map[string]string{"GATEWAY_ADMIN_TOKEN": "stale"}, append(addr, "--admin-token-file", tokenFile, "account", "create")...))
	// The local stack's file, relative to the working directory.
	if err := os.MkdirAll(".run", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ctl.DefaultAdminTokenFile, []byte(servertest.AdminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	decode(t, run(t, nil, append(addr, "account", "create")...))
}

func TestHelp(t *testing.T) {
	r := run(t, nil, "--help")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "key create --account ID") {
		t.Errorf("help: %+v", r)
	}
}

// TestAmountsAreExact checks that printed credits are the exact micros, for values a
// float would round.
func TestAmountsAreExact(t *testing.T) {
	mem := servertest.NewMemory()
	f := servertest.Start(t, mem, servertest.Options{})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr}
	id := decode(t, run(t, env, "account", "create"))["id"].(string)
	m := decode(t, run(t, env, "account", "topup", id, "--amount", "9007199254.740993"))
	if got := m["balance"].(json.Number).String(); got != "9007199254.740993" {
		t.Errorf("balance = %s", got)
	}
	if got, _ := ledger.ParseCredits(m["balance"].(json.Number).String()); got != 9007199254740993 {
		t.Errorf("balance_micros mismatch: %d", got)
	}
	if got := m["balance_micros"].(json.Number).String(); got != "9007199254740993" {
		t.Errorf("balance_micros = %s", got)
	}
}
