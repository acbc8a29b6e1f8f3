package e2e_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"
)

// chromiumPath is Debian's chromium (make test installs it when missing).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := exec.LookPath(p); err == nil {
				return p
			}
		}
	}
	t.Fatal("no chromium: install Debian's chromium package (make test does) or set CHROMIUM")
	return ""
}

// TestWebConsoleInABrowser drives the real console in headless Chromium against the
// real accounting service: sign in, create an account and top it up, create a key and
// see its secret once, edit its allowlist, call with the SDK, see usage and the
// statement move by the exact amounts, download the CSV. It writes the screenshots of
// the main pages into CONSOLE_SCREENSHOTS when set (CONSOLE_SCREENSHOTS=$PWD/docs
// refreshes the tracked ones on purpose), else into a temporary directory, so a test
// run leaves the tree clean.
func TestWebConsoleInABrowser(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	base := "http://" + gw.ConsoleAddr
	docs := os.Getenv("CONSOLE_SCREENSHOTS")
	if docs == "" {
		docs = t.TempDir()
	}
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var png []byte
			if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(docs, name), png, 0o644)
		})
	}
	// waitText waits until the element's text contains want (the page a form posted to
	// has loaded).
	waitText := func(sel, want string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			for {
				var got string
				if err := chromedp.Run(ctx, chromedp.Text(sel, &got, chromedp.ByQuery, chromedp.AtLeast(0))); err == nil && strings.Contains(got, want) {
					return nil
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("%s never read %q", sel, want)
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	var account, secret, afterReload, balance, hint, shownLabel, label string
	label = fmt.Sprintf("Browser test %d", time.Now().UnixNano())
	run("sign in and create an account",
		chromedp.Navigate(base+"/signin"),
		chromedp.Text("#token-hint", &hint, chromedp.ByID),
		chromedp.SendKeys("#token", gw.AdminToken, chromedp.ByID),
		chromedp.Click("#signin", chromedp.ByID),
		chromedp.WaitVisible("#create-account", chromedp.ByID),
		chromedp.SendKeys("#new-label", label, chromedp.ByID),
		chromedp.SetValue("#new-tier", "enterprise", chromedp.ByID),
		chromedp.Click("#create-account", chromedp.ByID),
		waitText("#note", "Account created"),
		chromedp.Text("#account-id", &account, chromedp.ByID),
		chromedp.Text("#account-label", &shownLabel, chromedp.ByID),
		chromedp.SendKeys("#amount", "10", chromedp.ByID),
		chromedp.Click("#topup", chromedp.ByID),
		waitText("#note", "Topped up"),
		chromedp.Text("#balance", &balance, chromedp.ByID),
	)
	if balance != "10.000000" {
		t.Fatalf("balance after a top-up of 10: %q", balance)
	}
	if shownLabel != label {
		t.Errorf("account label %q, want %q", shownLabel, label)
	}
	if a := ctl(t, "account", "show", account); a["tier"] != "enterprise" || a["label"] != label {
		t.Errorf("the account made in the browser: %v", a)
	}
	// The sign-in page says where the local stack keeps the admin token, never the token.
	if !strings.Contains(hint, "admin-token") || strings.Contains(hint, gw.AdminToken) {
		t.Errorf("sign-in hint %q", hint)
	}
	run("create a key",
		chromedp.SendKeys("#key-name", "browser", chromedp.ByID),
		chromedp.SendKeys("#key-models", "demo-chat", chromedp.ByID),
		chromedp.Click("#create-key", chromedp.ByID),
		chromedp.WaitVisible("#secret", chromedp.ByID),
		chromedp.Text("#secret", &secret, chromedp.ByID),
		shot("console-account.png"),
		chromedp.Navigate(base+"/accounts/"+account),
		chromedp.WaitVisible("#keys", chromedp.ByID),
		chromedp.OuterHTML("body", &afterReload, chromedp.ByQuery),
	)
	if !strings.HasPrefix(secret, "gw-") || strings.Contains(afterReload, secret) {
		t.Fatalf("secret %q shown once? second view contains it: %v", secret, strings.Contains(afterReload, secret))
	}

	// The allowlist says demo-chat only: demo-claude is refused.
	client := openaiClient(secret)
	ask := func(model string) (*openai.ChatCompletion, error) {
		return client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("from the console test [[mock:tokens=4]]")},
		})
	}
	if _, err := ask("demo-claude"); err == nil {
		t.Fatal("a model outside the allowlist answered")
	}
	run("edit the allowlist",
		chromedp.SetValue("#keys input.models", "demo-chat,demo-claude", chromedp.ByQuery),
		chromedp.Click("#keys button.save", chromedp.ByQuery),
		waitText("#note", "Key updated"),
	)
	var want int64
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := ask("demo-claude")
		if err == nil {
			want += tokenCost(r.Usage.PromptTokens, r.Usage.CompletionTokens, 3_000_000, 15_000_000)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the widened allowlist did not apply within 5 s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r, err := ask("demo-chat")
	if err != nil {
		t.Fatal(err)
	}
	want += tokenCost(r.Usage.PromptTokens, r.Usage.CompletionTokens, 1_000_000, 2_000_000)
	c := customer{account: account}
	c.waitSettled(t)

	var total, newBalance, settings, statement, found string
	run("usage and statement",
		chromedp.Navigate(base+"/accounts/"+account),
		chromedp.Text("#keys td.settings", &settings, chromedp.ByQuery),
		chromedp.Navigate(base+"/accounts/"+account+"/usage?by=model"),
		chromedp.WaitVisible("#usage", chromedp.ByID),
		chromedp.Text("#usage-total", &total, chromedp.ByID),
		shot("console-usage.png"),
		chromedp.Navigate(base+"/accounts/"+account+"/statement"),
		chromedp.WaitVisible("#statement", chromedp.ByID),
		chromedp.Text("#statement", &statement, chromedp.ByID),
		shot("console-statement.png"),
		chromedp.Navigate(base+"/accounts/"+account),
		chromedp.WaitVisible("#balance", chromedp.ByID),
		chromedp.Text("#balance", &newBalance, chromedp.ByID),
		chromedp.Navigate(base+"/accounts"),
		chromedp.WaitVisible("#accounts", chromedp.ByID),
		shot("console-accounts.png"),
		chromedp.SendKeys("#label-search", strings.ToLower(label), chromedp.ByID),
		chromedp.Click("#search-label", chromedp.ByID),
		waitText("#list-scope", "labels containing"),
		chromedp.OuterHTML("#accounts", &found, chromedp.ByID),
	)
	if !strings.Contains(settings, "demo-chat, demo-claude") || !strings.Contains(settings, "daily none, monthly none") {
		t.Errorf("the key's settings read %q", settings)
	}
	if !strings.Contains(statement, "browser") {
		t.Errorf("the statement does not name the key browser: %q", statement)
	}
	if !strings.Contains(found, label) || strings.Count(found, `<a href="/accounts/`) != 1 {
		t.Errorf("the search by label found %q", found)
	}
	if total != formatMicros(want) {
		t.Errorf("usage total %s, want %s", total, formatMicros(want))
	}
	if newBalance != formatMicros(10_000_000-want) {
		t.Errorf("balance %s, want %s", newBalance, formatMicros(10_000_000-want))
	}

	// The statement CSV, downloaded with the browser's session.
	var cookies []*network.Cookie
	run("session cookie", chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().Do(ctx)
		return err
	}))
	req, _ := http.NewRequest(http.MethodGet, base+"/accounts/"+account+"/statement?format=csv", nil)
	for _, ck := range cookies {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rows, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil || len(rows) != 4 { // header, top-up, two charges
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("statement CSV: %v %v %s", err, rows, b)
	}
	var charged int64
	for _, row := range rows[1:] {
		if row[2] == "charge" {
			charged += parseMicros(t, row[3])
		}
	}
	if -charged != want {
		t.Errorf("CSV charges %d micros, want %d", -charged, want)
	}
}

// chromium starts headless Chromium for t and returns its first tab's context (further
// tabs: chromedp.NewContext of it), ended with t.
func chromium(t *testing.T) context.Context {
	t.Helper()
	return chromiumWithin(t, 90*time.Second)
}

// chromiumWithin is chromium whose tab ends after d.
func chromiumWithin(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(ctx, d)
	t.Cleanup(func() { cancel(); cancelTab(); cancelAlloc() })
	return ctx
}

// Two top-up forms rendered in two tabs are two top-ups (10 then 5: +15), and the same
// form submitted again is shown refused and changes nothing.
func TestWebConsoleTopUpFormsInTwoTabs(t *testing.T) {
	t.Parallel()
	tab1 := chromium(t)
	base := "http://" + gw.ConsoleAddr
	var account string
	if err := chromedp.Run(tab1,
		chromedp.Navigate(base+"/signin"),
		chromedp.SendKeys("#token", gw.AdminToken, chromedp.ByID),
		chromedp.Click("#signin", chromedp.ByID),
		chromedp.WaitVisible("#create-account", chromedp.ByID),
		chromedp.Click("#create-account", chromedp.ByID),
		chromedp.WaitVisible("#account-id", chromedp.ByID),
		chromedp.Text("#account-id", &account, chromedp.ByID),
	); err != nil {
		t.Fatal(err)
	}
	tab2, cancel := chromedp.NewContext(tab1) // same browser, same session
	defer cancel()
	var form1 string
	if err := chromedp.Run(tab2, chromedp.Navigate(base+"/accounts/"+account), chromedp.WaitVisible("#amount", chromedp.ByID)); err != nil {
		t.Fatal(err)
	}
	// Both pages are rendered before either is submitted.
	var balance, note, refused string
	if err := chromedp.Run(tab1,
		chromedp.Value(`input[name="form"]`, &form1, chromedp.ByQuery),
		chromedp.SendKeys("#amount", "10", chromedp.ByID),
		chromedp.Click("#topup", chromedp.ByID),
		chromedp.WaitVisible("#note", chromedp.ByID),
	); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Run(tab2,
		chromedp.SendKeys("#amount", "5", chromedp.ByID),
		chromedp.Click("#topup", chromedp.ByID),
		chromedp.WaitVisible("#note", chromedp.ByID),
		chromedp.Text("#note", &note, chromedp.ByID),
		chromedp.Text("#balance", &balance, chromedp.ByID),
	); err != nil {
		t.Fatal(err)
	}
	if balance != "15.000000" || !strings.Contains(note, "Topped up 5.000000") {
		t.Fatalf("10 then 5 from two forms: balance %q, note %q; want 15.000000", balance, note)
	}
	// The first form again, as a resend would: the browser's own session and form.
	var cookies []*network.Cookie
	var csrf string
	if err := chromedp.Run(tab1,
		chromedp.Value(`input[name="csrf"]`, &csrf, chromedp.ByQuery),
		chromedp.ActionFunc(func(ctx context.Context) (err error) { cookies, err = network.GetCookies().Do(ctx); return err }),
	); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/accounts/"+account+"/topup",
		strings.NewReader("csrf="+csrf+"&form="+form1+"&amount=10"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, ck := range cookies {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := chromedp.Run(tab1,
		chromedp.Navigate(base+resp.Header.Get("Location")),
		chromedp.WaitVisible("#balance", chromedp.ByID),
		chromedp.Text("#error", &refused, chromedp.ByID),
		chromedp.Text("#balance", &balance, chromedp.ByID),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(refused, "Refused") || balance != "15.000000" {
		t.Errorf("the first form resent: %q, balance %q; want refused, 15.000000", refused, balance)
	}
}

// formatMicros writes micros as credits with six decimals, as the console does.
func formatMicros(m int64) string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	return fmt.Sprintf("%s%d.%06d", sign, m/1_000_000, m%1_000_000)
}

// parseMicros reads "-0.000026" into micros.
func parseMicros(t *testing.T, s string) int64 {
	t.Helper()
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	var w, f int64
	for _, c := range whole {
		w = w*10 + int64(c-'0')
	}
	for _, c := range (frac + "000000")[:6] {
		f = f*10 + int64(c-'0')
	}
	if neg {
		return -(w*1_000_000 + f)
	}
	return w*1_000_000 + f
}
