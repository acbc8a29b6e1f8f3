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
	"in_flight", "in_flight_high_cost", "label", "low_balance", "low_balance_micros", "reserved", "reserved_micros", "suspended", "tier", "topped_up"}

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
			map[string]any{"tier": "tight", "label": "", "balance": "0", "suspended": false, "topped_up": false}, accountFields},
		{"account create label", []string{"account", "create", "--label", "Acme research", "--tier", "tight"},
			map[string]any{"tier": "tight", "label": "Acme research"}, accountFields},
		{"account update label", []string{"account", "update", id, "--label", "Beta lab"},
			map[string]any{"id": id, "label": "Beta lab", "tier": "default"}, accountFields},
		{"account show label", []string{"account", "show", id}, map[string]any{"id": id, "label": "Beta lab"}, accountFields},
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

// TestAccountListByLabel: account list --label finds the accounts whose label contains
// the text, ignoring case; account update --label "" clears a label.
func TestAccountListByLabel(t *testing.T) {
	f := servertest.Start(t, servertest.NewMemory(), servertest.Options{})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr}
	acme := decode(t, run(t, env, "account", "create", "--label", "Acme research"))["id"].(string)
	decode(t, run(t, env, "account", "create", "--label", "Beta lab"))
	decode(t, run(t, env, "account", "create"))
	ids := func(args ...string) []string {
		t.Helper()
		out := []string{}
		for _, a := range decode(t, run(t, env, append([]string{"account", "list"}, args...)...))["accounts"].([]any) {
			out = append(out, a.(map[string]any)["id"].(string))
		}
		return out
	}
	if got := ids("--label", "ACME"); !reflect.DeepEqual(got, []string{acme}) {
		t.Errorf("account list --label ACME = %v, want [%s]", got, acme)
	}
	if got := ids(); len(got) != 3 {
		t.Errorf("account list = %v, want all 3", got)
	}
	if got := decode(t, run(t, env, "account", "update", acme, "--label", ""))["label"]; got != "" {
		t.Errorf("label after --label \"\" = %q", got)
	}
	if got := ids("--label", "acme"); len(got) != 0 {
		t.Errorf("account list --label acme after clearing = %v, want none", got)
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
		{"account update without a setting", env, []string{"account", "update", id}, 2, "needs a setting to change: --label"},
		{"account update not found", env, []string{"account", "update", "acct_nope", "--label", "x"}, 1, "gatewayctl: account not found\n"},
		{"account label too long", env, []string{"account", "create", "--label", strings.Repeat("x", 201)}, 1, "invalid argument: label has 201 characters"},
		{"account label line break", env, []string{"account", "update", id, "--label", "a\nb"}, 1, "invalid argument: label must not contain control"},
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

// TestHelp checks that every way of asking for help prints the usage on stdout and
// exits 0, with nothing on stderr, and needs no token or accounting.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"}, {"-help"},
		{"account", "--help"}, {"key", "create", "-h"}, {"--accounting-addr", "127.0.0.1:1", "help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := run(t, nil, args...)
			if r.code != 0 {
				t.Errorf("exit = %d, want 0 (stderr %q)", r.code, r.stderr)
			}
			if !strings.HasPrefix(r.stdout, "usage: gatewayctl") || !strings.Contains(r.stdout, "key create --account ID") {
				t.Errorf("stdout is not the usage: %q", r.stdout)
			}
			if r.stderr != "" {
				t.Errorf("stderr = %q, want nothing", r.stderr)
			}
		})
	}
}

// TestOneMessagePerFailure checks the exact line an operator reads for each kind of
// failure: the program's name, one message, no refusal wrapped in its own reason again.
func TestOneMessagePerFailure(t *testing.T) {
	mem := servertest.NewMemory()
	f := servertest.Start(t, mem, servertest.Options{})
	env := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": f.Addr}

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string // the whole of stderr
	}{
		{"unknown word", []string{"bogus"}, 2,
			"gatewayctl: unknown command \"bogus\"\nrun gatewayctl --help for usage\n"},
		{"unknown words", []string{"bogus", "thing"}, 2,
			"gatewayctl: unknown command \"bogus thing\"\nrun gatewayctl --help for usage\n"},
		{"unknown subcommand", []string{"account", "delete", "x"}, 2,
			"gatewayctl: unknown command \"account delete\"\nrun gatewayctl --help for usage\n"},
		{"group without subcommand", []string{"tier"}, 2,
			"gatewayctl: tier needs a subcommand: list or set\nrun gatewayctl --help for usage\n"},
		{"invalid argument", []string{"tier", "set", "tight", "--in-flight-high-cost", "5"}, 1,
			"gatewayctl: invalid argument: the high-cost pool must not be larger than the general pool\n"},
		{"invalid argument from the server", []string{"account", "create", "--tier", "gold"}, 1,
			"gatewayctl: invalid argument: unknown tier gold\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, env, tc.args...)
			if r.code != tc.wantCode {
				t.Errorf("exit = %d, want %d", r.code, tc.wantCode)
			}
			if r.stdout != "" {
				t.Errorf("stdout on failure: %q", r.stdout)
			}
			if r.stderr != tc.want {
				t.Errorf("stderr = %q\nwant     %q", r.stderr, tc.want)
			}
		})
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

// TestAccountingAddrSources: --accounting-addr, else $GATEWAY_ACCOUNTING_ADDR, else the
// address the local stack left in .run/accounting-addr (so that gatewayctl follows a
// stack moved with ACCOUNTING_ADDR), else 127.0.0.1:50052.
func TestAccountingAddrSources(t *testing.T) {
	mem := servertest.NewMemory()
	f := servertest.Start(t, mem, servertest.Options{})
	t.Chdir(t.TempDir())
	token := map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken}
	withEnv := func(addr string) map[string]string {
		return map[string]string{"GATEWAY_ADMIN_TOKEN": servertest.AdminToken, "GATEWAY_ACCOUNTING_ADDR": addr}
	}

	// Neither: the default address.
	if r := run(t, token, "account", "list"); r.code != 1 || !strings.Contains(r.stderr, "at 127.0.0.1:50052") {
		t.Errorf("without an address: %+v", r)
	}
	// The local stack's file.
	if err := os.MkdirAll(".run", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(".run", "accounting-addr"), []byte(f.Addr+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	decode(t, run(t, token, "account", "list"))
	// The environment wins over the file, the flag over both.
	if r := run(t, withEnv("127.0.0.1:1"), "account", "list"); r.code != 1 || !strings.Contains(r.stderr, "at 127.0.0.1:1") {
		t.Errorf("the environment did not win over the file: %+v", r)
	}
	decode(t, run(t, withEnv("127.0.0.1:1"), "--accounting-addr", f.Addr, "account", "list"))
	// An empty file is no address.
	if err := os.WriteFile(filepath.Join(".run", "accounting-addr"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, token, "account", "list"); r.code != 1 || !strings.Contains(r.stderr, "at 127.0.0.1:50052") {
		t.Errorf("with an empty file: %+v", r)
	}
}
