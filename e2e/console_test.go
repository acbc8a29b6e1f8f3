package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/llmgw/gateway/internal/testkit"
	"github.com/openai/openai-go/v3"
)

// applyWithin is how soon the spec says a key or tier change applies to new requests.
const applyWithin = 3 * time.Second

// errorCode is the "error.code" of a gateway error body, or "" for a success.
func errorCode(body []byte) string {
	var e testkit.ErrorEnvelope
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

// untilAnswer sends a small demo-chat-or-model request with key until the gateway
// answers want ("" for a success, else the error code), failing t when it still
// answers otherwise once the change had applyWithin to reach the gateway.
func untilAnswer(t *testing.T, key, model, want string) {
	t.Helper()
	deadline := time.Now().Add(applyWithin)
	for {
		status, _, body := rawRequest(t, http.MethodPost, "/chat/completions", key, chatBody(model, `"max_tokens":8`))
		got := errorCode(body)
		if (want == "" && status == http.StatusOK) || (want != "" && got == want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still answers %d %q %s after %s, want %q", model, status, got, body, applyWithin, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A key's allowlist, limits and expiry edited with gatewayctl change what the key may
// do within 3 s, like disable and revoke.
func TestConsoleKeyEditsApply(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10", keyArgs: []string{"--models", "demo-free"}})
	untilAnswer(t, c.key, "demo-chat", "model_not_allowed")

	k := ctl(t, "key", "update", c.keyID, "--models", "demo-free,demo-chat", "--name", "edited")
	if k["name"] != "edited" || fmt.Sprint(k["models"]) != "[demo-free demo-chat]" || k["key"] != nil {
		t.Fatalf("key update printed %v", k)
	}
	untilAnswer(t, c.key, "demo-chat", "")

	ctl(t, "key", "update", c.keyID, "--daily-limit", "0.000001")
	untilAnswer(t, c.key, "demo-chat", "key_limit_reached")
	k = ctl(t, "key", "update", c.keyID, "--no-daily-limit", "--all-models")
	if k["daily_limit"] != nil || fmt.Sprint(k["models"]) != "[]" || k["name"] != "edited" {
		t.Fatalf("clearing printed %v", k)
	}
	untilAnswer(t, c.key, "demo-chat", "")

	ctl(t, "key", "update", c.keyID, "--monthly-limit", "0.000001")
	untilAnswer(t, c.key, "demo-chat", "key_limit_reached")
	ctl(t, "key", "update", c.keyID, "--no-monthly-limit", "--expires", "2001-01-01T00:00:00Z")
	untilAnswer(t, c.key, "demo-chat", "invalid_api_key")
	k = ctl(t, "key", "update", c.keyID, "--no-expiry")
	if k["expires_at"] != nil {
		t.Fatalf("--no-expiry printed %v", k)
	}
	untilAnswer(t, c.key, "demo-chat", "")

	if out, err := ctlRaw("key", "update", c.keyID, "--daily-limit", "1", "--no-daily-limit"); err == nil {
		t.Errorf("contradictory flags accepted: %s", out)
	}
	c.waitSettled(t)
}

// A tier changed with gatewayctl applies to new requests of the tier's accounts.
func TestConsoleTierChangeApplies(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("e2e-%d", time.Now().UnixNano())
	tier := ctl(t, "tier", "set", name, "--rpm-before", "100", "--rpm-after", "100", "--in-flight", "4", "--in-flight-high-cost", "1")
	if tier["name"] != name || fmt.Sprint(tier["rpm_after_topup"]) != "100" || fmt.Sprint(tier["in_flight_high_cost"]) != "1" {
		t.Fatalf("tier set printed %v", tier)
	}
	c := newCustomer(t, customerOpts{tier: name, topup: "10"})
	untilAnswer(t, c.key, "demo-free", "")
	// Only the requests-per-minute after a top-up changes; the other limits stay.
	tier = ctl(t, "tier", "set", name, "--rpm-after", "0")
	if fmt.Sprint(tier["rpm_after_topup"]) != "0" || fmt.Sprint(tier["in_flight_general"]) != "4" {
		t.Fatalf("tier change printed %v", tier)
	}
	untilAnswer(t, c.key, "demo-free", "rate_limit_exceeded")
	list := ctl(t, "tier", "list")
	var found bool
	for _, tr := range list["tiers"].([]any) {
		m := tr.(map[string]any)
		found = found || (m["name"] == name && fmt.Sprint(m["rpm_after_topup"]) == "0")
		if m["name"] == "default" && fmt.Sprintf("%v %v %v %v", m["rpm_before_topup"], m["rpm_after_topup"], m["in_flight_general"], m["in_flight_high_cost"]) != "20 600 16 2" {
			t.Errorf("default tier = %v", m)
		}
	}
	if !found {
		t.Errorf("tier list lacks the change: %v", list)
	}
	if out, err := ctlRaw("tier", "set", name, "--in-flight", "1", "--in-flight-high-cost", "2"); err == nil {
		t.Errorf("a high-cost pool above the general one was accepted: %s", out)
	}
}

// Usage and the statement agree with the charges the SDK calls produced.
func TestConsoleUsageAndStatement(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	k2 := ctl(t, "key", "create", "--account", c.account, "--name", "second")
	key2, key2ID := fmt.Sprint(k2["key"]), fmt.Sprint(k2["id"])
	ctx := context.Background()

	var chatCost, chatIn, chatOut int64
	oc, ac := openaiClient(c.key), anthropicClient(key2)
	for _, tokens := range []int{3, 5} {
		resp, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "demo-chat",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("usage please [[mock:tokens=%d]]", tokens))},
		})
		if err != nil {
			t.Fatal(err)
		}
		chatCost += tokenCost(resp.Usage.PromptTokens, resp.Usage.CompletionTokens, 1_000_000, 2_000_000)
		chatIn += resp.Usage.PromptTokens
		chatOut += resp.Usage.CompletionTokens
	}
	// Settlement follows the reply: let the chat calls' charges land first, so that the
	// Messages call's is the newest entry of the statement.
	c.waitSettled(t)
	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     "demo-claude",
		MaxTokens: 100,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("claude usage [[mock:tokens=4]]"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	claudeCost := tokenCost(msg.Usage.InputTokens, msg.Usage.OutputTokens, 3_000_000, 15_000_000)
	// Refused: counts nothing.
	if status, _, _ := rawRequest(t, http.MethodPost, "/chat/completions", key2, chatBody("demo-unpriced", "")); status == http.StatusOK {
		t.Fatal("demo-unpriced answered")
	}
	acc := c.waitSettled(t)
	spent := 10_000_000 - micros(t, acc, "balance")
	if spent != chatCost+claudeCost {
		t.Fatalf("balance says %d spent, the SDK calls cost %d", spent, chatCost+claudeCost)
	}

	byModel := ctl(t, "usage", "--account", c.account)
	rows := usageRows(t, byModel, "model")
	want := map[string][4]int64{
		"demo-chat":   {2, chatIn, chatOut, chatCost},
		"demo-claude": {1, msg.Usage.InputTokens, msg.Usage.OutputTokens, claudeCost},
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("usage by model = %v, want %v", rows, want)
	}
	total := byModel["total"].(map[string]any)
	if micros(t, total, "charged") != spent || fmt.Sprint(total["requests"]) != "3" {
		t.Errorf("usage total = %v, want 3 requests charged %d", total, spent)
	}
	byKey := usageRows(t, ctl(t, "usage", "--account", c.account, "--by", "key"), "key_id")
	if byKey[c.keyID][3] != chatCost || byKey[key2ID][3] != claudeCost || len(byKey) != 2 {
		t.Errorf("usage by key = %v", byKey)
	}
	today := time.Now().UTC().Format(time.DateOnly)
	oneKey := usageRows(t, ctl(t, "usage", "--account", c.account, "--key", key2ID, "--by", "day", "--from", today, "--to", today), "day")
	if len(oneKey) != 1 || oneKey[today][3] != claudeCost {
		t.Errorf("usage of key 2 by day = %v, want %s: %d", oneKey, today, claudeCost)
	}

	// The statement, two entries a page, newest first, sums to the balance.
	var entries []map[string]any
	before := ""
	for page := 0; page < 10; page++ {
		args := []string{"ledger", "--account", c.account, "--limit", "2"}
		if before != "" {
			args = append(args, "--before", before)
		}
		st := ctl(t, args...)
		for _, e := range st["entries"].([]any) {
			entries = append(entries, e.(map[string]any))
		}
		if before = fmt.Sprint(st["next_before"]); before == "" {
			break
		}
	}
	var sum int64
	var kinds []string
	for _, e := range entries {
		sum += micros(t, e, "amount")
		kinds = append(kinds, fmt.Sprint(e["kind"]))
	}
	if sum != micros(t, acc, "balance") || !slices.Equal(kinds, []string{"charge", "charge", "charge", "top_up"}) {
		t.Errorf("statement %v sums to %d, balance %d", entries, sum, micros(t, acc, "balance"))
	}
	if e := entries[0]; e["model"] != "demo-claude" || e["key_id"] != key2ID || -micros(t, e, "amount") != claudeCost {
		t.Errorf("newest entry = %v", e)
	}

	keys := ctl(t, "key", "list", "--account", c.account)["keys"].([]any)
	if len(keys) != 2 || keys[0].(map[string]any)["id"] != c.keyID || keys[0].(map[string]any)["key"] != nil {
		t.Errorf("key list = %v", keys)
	}
	if !listsAccount(t, c.account) {
		t.Errorf("account list never shows %s", c.account)
	}
}

// usageRows reads usage rows as group -> {requests, input, output, charged micros}.
func usageRows(t *testing.T, report map[string]any, field string) map[string][4]int64 {
	t.Helper()
	out := map[string][4]int64{}
	for _, r := range report["rows"].([]any) {
		m := r.(map[string]any)
		var v [4]int64
		for i, f := range []string{"requests", "input_tokens", "output_tokens", "charged_micros"} {
			n, err := strconv.ParseInt(fmt.Sprint(m[f]), 10, 64)
			if err != nil {
				t.Fatalf("usage row %v: %s: %v", m, f, err)
			}
			v[i] = n
		}
		out[fmt.Sprint(m[field])] = v
	}
	return out
}

// listsAccount pages through account list until it finds id.
func listsAccount(t *testing.T, id string) bool {
	t.Helper()
	after := ""
	for range 1000 {
		args := []string{"account", "list", "--limit", "50"}
		if after != "" {
			args = append(args, "--after", after)
		}
		page := ctl(t, args...)
		for _, a := range page["accounts"].([]any) {
			if a.(map[string]any)["id"] == id {
				return true
			}
		}
		if after = fmt.Sprint(page["next_after"]); after == "" {
			return false
		}
	}
	return false
}

// An account's label, set at creation and later, is shown with the creation date and
// found by a part of it, through the ledger's journal and its derived tables.
func TestConsoleAccountLabel(t *testing.T) {
	t.Parallel()
	unique := fmt.Sprintf("e2e-label-%d", time.Now().UnixNano())
	acc := ctl(t, "account", "create", "--label", unique+" Research", "--tier", "tight")
	id, _ := acc["id"].(string)
	if acc["label"] != unique+" Research" || acc["tier"] != "tight" {
		t.Fatalf("account create printed %v", acc)
	}
	if created, err := time.Parse(time.RFC3339, fmt.Sprint(acc["created_at"])); err != nil || time.Since(created) > time.Minute {
		t.Errorf("created_at %v: %v", acc["created_at"], err)
	}
	if got := ctl(t, "account", "update", id, "--label", unique+" billing"); got["label"] != unique+" billing" || got["id"] != id {
		t.Fatalf("account update printed %v", got)
	}
	if got := ctl(t, "account", "show", id); got["label"] != unique+" billing" || got["created_at"] != acc["created_at"] {
		t.Errorf("account show printed %v", got)
	}
	list := ctl(t, "account", "list", "--label", strings.ToUpper(unique))
	accounts, _ := list["accounts"].([]any)
	if len(accounts) != 1 || accounts[0].(map[string]any)["id"] != id || accounts[0].(map[string]any)["label"] != unique+" billing" {
		t.Errorf("account list --label printed %v", list)
	}
}
