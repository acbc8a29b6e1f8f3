package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
)

// Projects inside an account, through the official SDKs: a parent's limit stopping its
// child's key, one project's spend limit held under concurrent keys, rpm and tpm with
// Retry-After, unused tokens given back at settlement, allowlists beating the key's,
// usage per project, and changes reaching the gateway within 3 s.

// newAccount creates an account (in tier, when not empty) topped up with topup credits.
func newAccount(t *testing.T, tier, topup string) string {
	t.Helper()
	args := []string{"account", "create"}
	if tier != "" {
		args = append(args, "--tier", tier)
	}
	id := fmt.Sprint(ctl(t, args...)["id"])
	ctl(t, "account", "topup", id, "--amount", topup)
	return id
}

// newProject creates a project of account with gatewayctl's flags args and returns its id.
func newProject(t *testing.T, account, name string, args ...string) string {
	t.Helper()
	return fmt.Sprint(ctl(t, append([]string{"project", "create", "--account", account, "--name", name}, args...)...)["id"])
}

// keyIn creates a key of account in project ("" for none) with gatewayctl's flags args.
func keyIn(t *testing.T, account, project string, args ...string) customer {
	t.Helper()
	args = append([]string{"key", "create", "--account", account}, args...)
	if project != "" {
		args = append(args, "--project", project)
	}
	k := ctl(t, args...)
	return customer{account: account, key: fmt.Sprint(k["key"]), keyID: fmt.Sprint(k["id"])}
}

// askChat asks model through the OpenAI SDK for at most maxTokens.
func askChat(key, model, prompt string, maxTokens int64) (*openai.ChatCompletion, error) {
	client := openaiClient(key)
	return client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:     model,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		MaxTokens: openai.Int(maxTokens),
	})
}

// messagesOnce asks model through the Anthropic SDK's Messages.
func messagesOnce(key, model, prompt string) (*anthropic.Message, error) {
	client := anthropicClient(key)
	return client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 16,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	})
}

// openaiRefusal asserts that err is the OpenAI SDK's error with status and code, and
// returns it.
func openaiRefusal(t *testing.T, err error, status int, code string) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != status || apiErr.Code != code {
		t.Fatalf("err = %v, want %d %s", err, status, code)
	}
	return apiErr
}

// anthropicRefusal asserts that err is the Anthropic SDK's error with status, its body
// carrying code.
func anthropicRefusal(t *testing.T, err error, status int, code string) {
	t.Helper()
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != status || !strings.Contains(apiErr.RawJSON(), `"code":"`+code+`"`) {
		t.Fatalf("err = %v, want %d %s", err, status, code)
	}
}

// eligible is what GET /v1/models lists for key, through the OpenAI SDK.
func eligible(t *testing.T, key string) map[string]bool {
	t.Helper()
	client := openaiClient(key)
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, m := range page.Data {
		got[m.ID] = true
	}
	return got
}

// retryAfter reads an SDK error's Retry-After in whole seconds (0 when absent).
func retryAfter(t *testing.T, e *openai.Error) int {
	t.Helper()
	v := e.Response.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("Retry-After %q is not whole seconds", v)
	}
	return n
}

// statementCharges sums the account's charges in its ledger statement and counts them.
func statementCharges(t *testing.T, account string) (sum int64, n int) {
	t.Helper()
	st := ctl(t, "ledger", "--account", account, "--limit", "500")
	for _, e := range st["entries"].([]any) {
		e := e.(map[string]any)
		if e["kind"] == "charge" {
			sum -= micros(t, e, "amount")
			n++
		}
	}
	return sum, n
}

// TestProjectParentDailyLimitStopsChild: a key in a child project whose parent's daily
// limit is below any hold is refused 429 key_limit_reached naming the parent and the
// window, on chat and on Messages, and nothing is held or charged anywhere.
func TestProjectParentDailyLimitStopsChild(t *testing.T) {
	t.Parallel()
	acc := newAccount(t, "", "10")
	parent := newProject(t, acc, "parent", "--daily-limit", "0.00001")
	child := newProject(t, acc, "child", "--parent", parent)
	c := keyIn(t, acc, child)

	_, err := askChat(c.key, "demo-chat", "hi", 16)
	e := openaiRefusal(t, err, http.StatusTooManyRequests, "key_limit_reached")
	if !strings.Contains(e.Message, "project "+parent) || !strings.Contains(e.Message, "daily") {
		t.Errorf("message %q does not name the parent project and its daily window", e.Message)
	}
	_, err = messagesOnce(c.key, "demo-claude", "hi")
	anthropicRefusal(t, err, http.StatusTooManyRequests, "key_limit_reached")

	if got := c.balance(t); got != 10_000_000 {
		t.Errorf("balance %d after refusals, want 10 credits", got)
	}
	for _, p := range []string{parent, child} {
		show := ctl(t, "project", "show", p)
		if micros(t, show, "spent_today") != 0 || micros(t, show, "reserved") != 0 {
			t.Errorf("project %s after refusals: %v", p, show)
		}
	}
	if sum, n := statementCharges(t, acc); n != 0 {
		t.Errorf("%d charges (%d micros) after refusals", n, sum)
	}
}

// TestProjectLimitUnderConcurrentKeys: 40 clients at once, from four keys of one
// project whose daily limit admits only some of their requests, each sending three
// in turn. The project's spend stays within the limit and equals the sum of the charges
// in the ledger statement, each the catalog price of its answer's usage; every other
// request is refused 429 key_limit_reached.
func TestProjectLimitUnderConcurrentKeys(t *testing.T) {
	t.Parallel()
	const limit = 600 // micros: five holds of these requests, about twenty charges
	acc := newAccount(t, "enterprise", "10")
	p := newProject(t, acc, "shared", "--daily-limit", "0.0006")
	keys := make([]customer, 4)
	for i := range keys {
		keys[i] = keyIn(t, acc, p)
	}

	var (
		mu       sync.Mutex
		priced   int64
		admitted int
		refused  int
		wg       sync.WaitGroup
	)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				resp, err := askChat(keys[i%len(keys)].key, "demo-chat", "hi [[mock:tokens=14]]", 16)
				mu.Lock()
				var apiErr *openai.Error
				switch {
				case err == nil:
					admitted++
					priced += tokenCost(resp.Usage.PromptTokens, resp.Usage.CompletionTokens, 1_000_000, 2_000_000)
				case errors.As(err, &apiErr) && apiErr.StatusCode == 429 && apiErr.Code == "key_limit_reached":
					refused++
				default:
					t.Errorf("client %d: %v", i, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	keys[0].waitSettled(t)

	t.Logf("admitted %d, refused %d", admitted, refused)
	if admitted == 0 || refused == 0 {
		t.Fatalf("admitted %d, refused %d: want both", admitted, refused)
	}
	show := ctl(t, "project", "show", p)
	spent := micros(t, show, "spent_today")
	charges, n := statementCharges(t, acc)
	t.Logf("project spent %d micros of %d", spent, limit)
	if spent > limit {
		t.Errorf("project spent %d micros, above its limit %d", spent, limit)
	}
	if spent != charges || n != admitted || charges != priced {
		t.Errorf("project spent %d; statement %d charges summing %d; %d answers priced %d", spent, n, charges, admitted, priced)
	}
	if r := micros(t, show, "reserved"); r != 0 {
		t.Errorf("project still holds %d", r)
	}
	if moved := 10_000_000 - keys[0].balance(t); moved != charges {
		t.Errorf("balance moved %d, charges %d", moved, charges)
	}
}

// TestProjectRateLimits: a project's rpm and a key's own rpm refuse the request past
// them 429 rate_limit_exceeded with Retry-After; a request whose token bound exceeds a
// project's tpm is refused without Retry-After, saying it can never fit.
func TestProjectRateLimits(t *testing.T) {
	t.Parallel()
	acc := newAccount(t, "", "10")
	t.Run("project rpm", func(t *testing.T) {
		c := keyIn(t, acc, newProject(t, acc, "rpm", "--rpm", "2"))
		checkRPM(t, c, 2)
	})
	t.Run("key rpm", func(t *testing.T) {
		c := keyIn(t, acc, newProject(t, acc, "keyrpm"), "--rpm", "1")
		checkRPM(t, c, 1)
	})
	t.Run("larger than tpm", func(t *testing.T) {
		c := keyIn(t, acc, newProject(t, acc, "tpm", "--tpm", "1000"))
		_, err := askChat(c.key, "demo-chat", "hi", 2000)
		e := openaiRefusal(t, err, http.StatusTooManyRequests, "rate_limit_exceeded")
		if ra := e.Response.Header.Get("Retry-After"); ra != "" || !strings.Contains(e.Message, "larger than the tokens-per-minute limit") {
			t.Errorf("Retry-After %q, message %q: want none, and that it can never fit", ra, e.Message)
		}
		if _, err := askChat(c.key, "demo-chat", "hi", 16); err != nil {
			t.Errorf("a request within the tpm: %v", err)
		}
	})
}

// checkRPM sends n requests that pass and one that the rpm refuses.
func checkRPM(t *testing.T, c customer, n int) {
	t.Helper()
	for i := range n {
		if _, err := askChat(c.key, "demo-chat", "hi", 16); err != nil {
			t.Fatalf("request %d of %d: %v", i+1, n, err)
		}
	}
	_, err := askChat(c.key, "demo-chat", "hi", 16)
	e := openaiRefusal(t, err, http.StatusTooManyRequests, "rate_limit_exceeded")
	if ra := retryAfter(t, e); ra < 1 || ra > 60 {
		t.Errorf("Retry-After %d, want 1..60 s", ra)
	}
}

// TestProjectTokensGivenBack: a request whose token bound nearly fills the project's
// tpm bucket makes a second one wait (429 with Retry-After) while it is in flight; once
// it is settled, the tokens it did not use are back and the second fits at once.
func TestProjectTokensGivenBack(t *testing.T) {
	t.Parallel()
	acc := newAccount(t, "", "10")
	p := newProject(t, acc, "bucket", "--tpm", "1000")
	c := keyIn(t, acc, p)
	// Bound: the prompt's estimate (under 100 tokens) + 800; used: a few dozen.
	first := make(chan error, 1)
	go func() {
		_, err := askChat(c.key, "demo-chat", "hi [[mock:tokens=3]] [[mock:slow=3]]", 800)
		first <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for micros(t, ctl(t, "project", "show", p), "reserved") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first request was never held")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := askChat(c.key, "demo-chat", "hi", 800)
	e := openaiRefusal(t, err, http.StatusTooManyRequests, "rate_limit_exceeded")
	if ra := retryAfter(t, e); ra < 1 {
		t.Errorf("Retry-After %d while the first is in flight, want ≥ 1", ra)
	}
	if err := <-first; err != nil {
		t.Fatalf("first request: %v", err)
	}
	c.waitSettled(t)
	// Without the give-back, 1000/60 tokens a second would take about 45 s to refill.
	if _, err := askChat(c.key, "demo-chat", "hi", 800); err != nil {
		t.Errorf("after the first settled: %v, want its unused tokens back", err)
	}
}

// TestProjectAllowlistBeatsKey: a key that allows every model, in a project that allows
// demo-chat only, is refused demo-claude with 403 model_not_allowed on chat and on
// Messages, lists only what its project allows, and calls demo-chat on both APIs.
func TestProjectAllowlistBeatsKey(t *testing.T) {
	t.Parallel()
	acc := newAccount(t, "", "10")
	p := newProject(t, acc, "chat-only", "--models", "demo-chat")
	c := keyIn(t, acc, p)

	_, err := askChat(c.key, "demo-claude", "hi", 16)
	e := openaiRefusal(t, err, http.StatusForbidden, "model_not_allowed")
	if !strings.Contains(e.Message, "project") || !strings.Contains(e.Message, "'demo-claude'") {
		t.Errorf("message %q does not say a project refuses demo-claude", e.Message)
	}
	_, err = messagesOnce(c.key, "demo-claude", "hi")
	anthropicRefusal(t, err, http.StatusForbidden, "model_not_allowed")

	if got := eligible(t, c.key); !got["demo-chat"] || got["demo-claude"] || got["demo-free"] {
		t.Errorf("GET /v1/models lists %v, want demo-chat and nothing the project excludes", got)
	}
	if _, err := askChat(c.key, "demo-chat", "hi", 16); err != nil {
		t.Errorf("demo-chat on chat: %v", err)
	}
	if _, err := messagesOnce(c.key, "demo-chat", "hi"); err != nil {
		t.Errorf("demo-chat on Messages: %v", err)
	}
}

// TestUsageByProject: usage --by project has one row per project, each charge in its
// key's own project ("" outside any), adding up to the total; --project counts the
// project and its descendants.
func TestUsageByProject(t *testing.T) {
	t.Parallel()
	acc := newAccount(t, "", "10")
	top := newProject(t, acc, "top")
	sub := newProject(t, acc, "sub", "--parent", top)
	keys := map[string]customer{top: keyIn(t, acc, top), sub: keyIn(t, acc, sub), "": keyIn(t, acc, "")}
	spent := map[string]int64{}
	for p, c := range keys {
		resp, err := askChat(c.key, "demo-chat", "hi [[mock:tokens=4]]", 16)
		if err != nil {
			t.Fatal(err)
		}
		spent[p] = tokenCost(resp.Usage.PromptTokens, resp.Usage.CompletionTokens, 1_000_000, 2_000_000)
	}
	keys[""].waitSettled(t)

	usage := ctl(t, "usage", "--account", acc, "--by", "project")
	rows := usage["rows"].([]any)
	var sum int64
	got := map[string]int64{}
	for _, r := range rows {
		r := r.(map[string]any)
		got[fmt.Sprint(r["project_id"])] += micros(t, r, "charged")
		sum += micros(t, r, "charged")
	}
	total := micros(t, usage["total"].(map[string]any), "charged")
	if len(rows) != 3 || sum != total || total != spent[top]+spent[sub]+spent[""] {
		t.Errorf("rows %v sum to %d, total %d; want 3 rows adding up to %d", rows, sum, total, spent[top]+spent[sub]+spent[""])
	}
	for p, want := range spent {
		if got[p] != want {
			t.Errorf("project %q row charged %d, want %d", p, got[p], want)
		}
	}
	for p, want := range map[string]int64{top: spent[top] + spent[sub], sub: spent[sub]} {
		u := ctl(t, "usage", "--account", acc, "--project", p)
		if got := micros(t, u["total"].(map[string]any), "charged"); got != want {
			t.Errorf("usage --project %s: %d, want %d (the project and its descendants)", p, got, want)
		}
	}
}

// TestProjectChangesReachGatewayWithin3s: a change of a project's allowlist (of the
// key's project or of one above it) and a key's move between projects apply to the
// gateway's next requests within 3 s: GET /v1/models and admission both follow, while
// the grant cached for the key would otherwise be used for 30 s.
func TestProjectChangesReachGatewayWithin3s(t *testing.T) {
	t.Parallel()
	acc := newAccount(t, "", "10")
	top := newProject(t, acc, "top")
	child := newProject(t, acc, "child", "--parent", top)
	open := newProject(t, acc, "open")
	c := keyIn(t, acc, child)

	chatAllowed := func() (bool, bool) {
		_, err := askChat(c.key, "demo-chat", "hi", 16)
		var apiErr *openai.Error
		switch {
		case err == nil:
			return true, true
		case errors.As(err, &apiErr) && apiErr.Code == "model_not_allowed":
			return false, true
		}
		t.Fatalf("demo-chat: %v", err)
		return false, false
	}
	// within waits up to 3 s from now for the gateway to show chat allowed or not, both
	// on GET /v1/models and on admission.
	within := func(what string, allowed bool) {
		t.Helper()
		start := time.Now()
		for {
			models := eligible(t, c.key)
			if models["demo-chat"] == allowed && models["demo-claude"] {
				if got, _ := chatAllowed(); got == allowed {
					t.Logf("%s: seen after %v", what, time.Since(start).Round(time.Millisecond))
					return
				}
			}
			if time.Since(start) > 3*time.Second {
				t.Fatalf("%s: not seen within 3 s (models %v)", what, models)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Both answers cached before each change.
	within("at the start", true)

	ctl(t, "project", "update", top, "--models", "demo-claude")
	within("the parent's allowlist narrowed", false)
	ctl(t, "project", "update", top, "--all-models")
	within("the parent's allowlist widened", true)
	ctl(t, "project", "update", child, "--models", "demo-claude,demo-free")
	within("the key's project narrowed", false)
	ctl(t, "key", "update", c.keyID, "--project", open)
	within("the key moved to a project without an allowlist", true)
	ctl(t, "project", "update", open, "--models", "demo-claude")
	within("its new project narrowed", false)
}
