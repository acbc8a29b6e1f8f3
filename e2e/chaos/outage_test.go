package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/gateway/e2e/internal/harness"
	"github.com/llmgw/gateway/e2e/stack"
)

// The outage tests each take down a part of a stack of their own (harness.Env.Another)
// and run in parallel with TestFaults and with each other: an upstream outage must not
// cool the channels TestFaults uses, and an accounting outage must not stop its traffic.

// ownStack starts a stack for the test alone (each of tune changing its configuration)
// and, when the test ends, stops it (every part drains and settles) and checks its
// ledger: the invariants hold, nothing is held.
func ownStack(t *testing.T, tune ...func(*stack.Config)) *stack.Stack {
	t.Helper()
	e, err := env.Another(tune...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.StopStack()
		if err := e.CheckLedger(); err != nil {
			t.Errorf("ledger after the test: %v", err)
		}
		if t.Failed() {
			e.DumpLog()
		}
		e.Close()
	})
	return e.Stack
}

// answer is what one client of the official OpenAI SDK saw.
type answer struct {
	words      int // filler words: unique per key, so a charge's input tokens name its call
	start, end time.Time
	err        error
	in, out    int64 // usage of a complete answer
}

// sdkClient is the official OpenAI SDK on s, without its retries (each call is judged).
func sdkClient(s *stack.Stack, secret string) openai.Client {
	return openai.NewClient(option.WithBaseURL(s.BaseURL+"/"), option.WithAPIKey(secret), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Timeout: 10 * time.Minute}))
}

// prompt makes call n's prompt: n filler words (twice over, as do's: its token count
// names the call) and the mock's directives.
func prompt(n int, directives string) string {
	return strings.Repeat("w ", 2*n) + directives
}

// chat sends one answer's request; with stream, started is closed at its first chunk.
func chat(c openai.Client, model string, a *answer, directives string, stream bool, started chan<- struct{}) {
	a.start = time.Now()
	defer func() { a.end = time.Now() }()
	params := openai.ChatCompletionNewParams{
		Model:     model,
		MaxTokens: openai.Int(16),
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt(a.words, directives))},
	}
	if !stream {
		r, err := c.Chat.Completions.New(context.Background(), params)
		if err == nil {
			a.in, a.out = r.Usage.PromptTokens, r.Usage.CompletionTokens
		}
		a.err = err
		return
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.Chat.Completions.NewStreaming(context.Background(), params)
	defer s.Close()
	first := true
	for s.Next() {
		if first && started != nil {
			close(started)
		}
		first = false
		if u := s.Current().Usage; u.PromptTokens > 0 {
			a.in, a.out = u.PromptTokens, u.CompletionTokens
		}
	}
	if a.err = s.Err(); a.err == nil && a.in == 0 {
		a.err = errors.New("the stream ended without its usage")
	}
}

// ctlOn runs gatewayctl on s and decodes its JSON.
func ctlOn(t *testing.T, s *stack.Stack, args ...string) map[string]any {
	t.Helper()
	out, err := harness.Ctl(s, args...)
	if err != nil {
		t.Fatalf("gatewayctl %s: %v", strings.Join(args, " "), err)
	}
	return decodeCtl(t, args, out)
}

// waitSettled waits until the account holds nothing (every settlement landed or its
// hold expired), at most bound.
func waitSettled(t *testing.T, s *stack.Stack, k *key, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		a := ctlOn(t, s, "account", "show", k.account)
		if fmt.Sprint(a["in_flight"]) == "0" && fmt.Sprint(a["reserved_micros"]) == "0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("account still holds %v micros in %v requests %v after the traffic", a["reserved_micros"], a["in_flight"], bound)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// judgeAnswers checks the key's ledger (read with gatewayctl) against what its clients
// saw: every complete answer is charged exactly once, exactly the model's price of its
// usage (demo-chat's and demo-failover's), and nothing else is charged. It returns how
// many answers were complete.
func judgeAnswers(t *testing.T, s *stack.Stack, k *key, answers []*answer) int {
	t.Helper()
	charges := map[int64][]int64{} // input tokens → amounts
	args := []string{"ledger", "--account", k.account, "--limit", "500"}
	for page := args; ; {
		led := ctlOn(t, s, page...)
		entries, _ := led["entries"].([]any)
		for _, e := range entries {
			m, _ := e.(map[string]any)
			if m["kind"] != "charge" {
				continue
			}
			var in, amount int64
			_, _ = fmt.Sscan(fmt.Sprint(m["input_tokens"]), &in)
			_, _ = fmt.Sscan(fmt.Sprint(m["amount_micros"]), &amount)
			charges[in] = append(charges[in], -amount)
		}
		next, _ := led["next_before"].(string)
		if next == "" {
			break
		}
		page = append(args, "--before", next)
	}
	done := 0
	for _, a := range answers {
		if a.err != nil {
			continue
		}
		done++
		want := chatCost(a.in, a.out)
		if got := charges[a.in]; len(got) != 1 || got[0] != want {
			t.Errorf("answer %d (usage %d/%d, %s..%s) charged %v, want once %d",
				a.words, a.in, a.out, a.start.Format(time.StampMilli), a.end.Format(time.StampMilli), got, want)
		}
		delete(charges, a.in)
	}
	if len(charges) > 0 {
		t.Errorf("charges of no complete answer (input tokens → micros): %v", charges)
	}
	return done
}
