package e2e_test

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/e2e/internal/harness"
	"github.com/openai/openai-go/v3"
)

// scrape reads a Prometheus text endpoint into series → value (harness.Scrape).
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	m, err := harness.Scrape(addr)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// series spells a series name with its labels (pairs), sorted as the client prints them.
func series(name string, kv ...string) string {
	if len(kv) == 0 {
		return name
	}
	type pair struct{ k, v string }
	ps := make([]pair, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		ps = append(ps, pair{kv[i], kv[i+1]})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].k < ps[j].k })
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.k + `="` + p.v + `"`
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// waitIdle polls extproc's metrics until no reservation is in flight, so that no
// settlement of an earlier request can land inside a measured window.
func waitIdle(t *testing.T) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		m := scrape(t, gw.ExtprocMetricsAddr)
		if v, ok := m["gateway_reservations_in_flight"]; !ok {
			t.Fatal("extproc exports no gateway_reservations_in_flight")
		} else if v == 0 {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("reservations still in flight: %v", m["gateway_reservations_in_flight"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMetrics drives a success, a refusal and an upstream failure through the stack and
// finds each in extproc's and accounting's /metrics with exact deltas.
//
// It is deliberately not parallel: Go runs every sequential top-level test before the
// parallel ones start, so no other request of the suite moves the counters between the
// two scrapes (the shared totals such as gateway_tokens_total have no label that would
// single out this test's requests). waitIdle makes sure no earlier settlement lands
// inside the window.
func TestMetrics(t *testing.T) {
	paid := newCustomer(t, customerOpts{topup: "10"})
	unpaid := newCustomer(t, customerOpts{})
	poor := newCustomer(t, customerOpts{topup: "0.000001"})
	beforeBalance := paid.balance(t)

	ex0 := waitIdle(t)
	ac0 := scrape(t, gw.AccountingMetricsAdr)

	ctx := context.Background()
	paidClient, unpaidClient := openaiClient(paid.key), openaiClient(unpaid.key)
	resp, err := paidClient.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:     "demo-chat",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("count for the metrics [[mock:tokens=9]]")},
		MaxTokens: openai.Int(64),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = unpaidClient.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "demo-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("refused")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "model_requires_topup" {
		t.Fatalf("unpaid request: %v", err)
	}
	_, err = paidClient.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "demo-exhausted",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("upstream out of funds")},
	})
	if !errors.As(err, &apiErr) || apiErr.Code != "upstream_account_unavailable" {
		t.Fatalf("exhausted upstream: %v", err)
	}
	// Refused by the ledger: the account cannot cover the hold.
	poorClient := openaiClient(poor.key)
	_, err = poorClient.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "demo-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("refused by the ledger")},
	})
	if !errors.As(err, &apiErr) || apiErr.Code != "insufficient_credits" {
		t.Fatalf("poor request: %v", err)
	}
	paid.waitSettled(t)
	ex1 := waitIdle(t)
	ac1 := scrape(t, gw.AccountingMetricsAdr)
	charged := beforeBalance - paid.balance(t)

	delta := func(m0, m1 map[string]float64, s string) float64 { return m1[s] - m0[s] }
	chat := "/v1/chat/completions"
	exact := []struct {
		name   string
		series string
		want   float64
	}{
		{"the success", series("gateway_requests_total", "endpoint", chat, "model", "demo-chat", "channel", "mock-demo-chat", "code", "ok"), 1},
		{"the refusal", series("gateway_requests_total", "endpoint", chat, "model", "demo-chat", "channel", "none", "code", "model_requires_topup"), 1},
		{"the upstream failure", series("gateway_requests_total", "endpoint", chat, "model", "demo-exhausted", "channel", "mock-demo-exhausted", "code", "upstream_account_unavailable"), 1},
		{"its kind", series("gateway_upstream_errors_total", "kind", "account_unavailable"), 1},
		{"input tokens billed", series("gateway_tokens_total", "direction", "input"), float64(resp.Usage.PromptTokens)},
		{"output tokens billed", series("gateway_tokens_total", "direction", "output"), 9},
		{"credits committed", series("gateway_credits_micros_total", "kind", "committed"), float64(charged)},
		{"spend of the account's tier", series("gateway_spend_micros_total", "model", "demo-chat", "tier", "default"), float64(charged)},
		{"settlement retries", "gateway_settlement_retries_total", 0},
		{"settlements given up", "gateway_settlements_given_up_total", 0},
		{"reserve calls", series("gateway_accounting_call_duration_seconds_count", "method", "Reserve"), 3},
		{"commit calls", series("gateway_accounting_call_duration_seconds_count", "method", "Commit"), 1},
		{"release calls", series("gateway_accounting_call_duration_seconds_count", "method", "Release"), 1},
		{"request bodies handled", series("gateway_phase_duration_seconds_count", "phase", "request_body"), 4},
		{"the ledger's refusal", series("gateway_requests_total", "endpoint", chat, "model", "demo-chat", "channel", "none", "code", "insufficient_credits"), 1},
		{"settlements", series("gateway_phase_duration_seconds_count", "phase", "settle"), 2},
	}
	for _, e := range exact {
		if got := delta(ex0, ex1, e.series); got != e.want {
			t.Errorf("extproc %s: %s moved by %v, want %v", e.name, e.series, got, e.want)
		}
	}
	if charged != tokenCost(resp.Usage.PromptTokens, resp.Usage.CompletionTokens, 1_000_000, 2_000_000) || charged <= 0 {
		t.Errorf("charged %d for %+v", charged, resp.Usage)
	}
	held := delta(ex0, ex1, series("gateway_credits_micros_total", "kind", "held"))
	released := delta(ex0, ex1, series("gateway_credits_micros_total", "kind", "released"))
	if held <= float64(charged) || held != float64(charged)+released {
		t.Errorf("held %v = committed %d + released %v does not hold", held, charged, released)
	}
	if ex1["gateway_reservations_in_flight"] != 0 {
		t.Errorf("in flight %v after settlement", ex1["gateway_reservations_in_flight"])
	}

	acExact := []struct {
		series string
		want   float64
	}{
		{series("accounting_grpc_request_duration_seconds_count", "method", "Reserve", "code", "OK"), 2},
		{series("accounting_grpc_request_duration_seconds_count", "method", "Commit", "code", "OK"), 1},
		{series("accounting_grpc_request_duration_seconds_count", "method", "Release", "code", "OK"), 1},
		{series("accounting_ledger_refusals_total", "op", "Reserve", "reason", "insufficient_credits"), 1},
	}
	for _, e := range acExact {
		if got := delta(ac0, ac1, e.series); got != e.want {
			t.Errorf("accounting: %s moved by %v, want %v", e.series, got, e.want)
		}
	}
	for s, v := range ac1 {
		if strings.HasPrefix(s, "accounting_ledger_errors_total") && v != ac0[s] {
			t.Errorf("ledger errors during the test: %s %v → %v", s, ac0[s], v)
		}
	}
	// The gateway's own series are served, at their quiet values.
	for _, name := range []string{"gateway_settlement_retries_total", "gateway_settlements_given_up_total", "gateway_settlements_retrying"} {
		if _, ok := ex1[name]; !ok {
			t.Errorf("extproc exports no %s", name)
		}
	}
	if ex1["gateway_settlements_retrying"] != 0 {
		t.Errorf("gateway_settlements_retrying %v after every settlement landed", ex1["gateway_settlements_retrying"])
	}
	if v, ok := ac1["accounting_journal_append_errors_total"]; !ok || v != 0 {
		t.Errorf("accounting_journal_append_errors_total = %v (exported: %v), want 0", v, ok)
	}
	if v, ok := ac1["accounting_ledger_takeovers_total"]; !ok || v < 1 {
		t.Errorf("accounting_ledger_takeovers_total = %v (exported: %v), want at least the owner's start", v, ok)
	}
	if v, ok := ac1["accounting_ledger_owner"]; !ok || v != 1 {
		t.Errorf("accounting_ledger_owner = %v (exported: %v), want 1 on the stack's one accounting", v, ok)
	}
	if _, ok := ac1["accounting_reservations_expired_total"]; !ok {
		t.Error("accounting exports no accounting_reservations_expired_total")
	}
	// The three reserves (one refused), the commit and the release above were decided
	// by the ledger's owner; the four that changed something were appended in one to
	// four transactions.
	if got := delta(ac0, ac1, "accounting_ledger_group_operations_total"); got != 5 {
		t.Errorf("accounting_ledger_group_operations_total moved by %v, want 5", got)
	}
	if got := delta(ac0, ac1, "accounting_ledger_group_transactions_total"); got < 1 || got > 4 {
		t.Errorf("accounting_ledger_group_transactions_total moved by %v, want 1 to 4", got)
	}

	// Health endpoints of both processes.
	for _, u := range []string{gw.ExtprocMetricsAddr, gw.AccountingMetricsAdr} {
		for _, path := range []string{"/healthz", "/readyz"} {
			r, err := http.Get("http://" + u + path)
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			if r.StatusCode != http.StatusOK {
				t.Errorf("%s%s = %d", u, path, r.StatusCode)
			}
		}
	}
}

// genAISeries finds, among m's series, the one of metric name (a histogram's _count or
// _sum) whose labels are exactly the pairs of kv; "" when none is.
func genAISeries(m map[string]float64, name string, kv ...string) string {
	for s := range m {
		if !strings.HasPrefix(s, name+"{") || strings.Count(s, `="`) != len(kv)/2 {
			continue
		}
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			ok = ok && strings.Contains(s, kv[i]+`="`+kv[i+1]+`"`)
		}
		if ok {
			return s
		}
	}
	return ""
}

// TestGenAIMetrics sends a non-streamed and a streamed chat request and finds both in
// extproc's /metrics on the OpenTelemetry GenAI histograms, with the conventions'
// attributes and the tokens the SDK reported. Not parallel, like TestMetrics.
func TestGenAIMetrics(t *testing.T) {
	c := newCustomer(t, customerOpts{topup: "10"})
	ex0 := waitIdle(t)
	client := openaiClient(c.key)
	ctx := context.Background()
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "demo-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("genai metrics [[mock:tokens=7]]")},
	})
	if err != nil {
		t.Fatal(err)
	}
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "demo-chat",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("genai metrics streamed [[mock:tokens=11]]")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var streamed openai.CompletionUsage
	for stream.Next() {
		if u := stream.Current().Usage; u.TotalTokens > 0 {
			streamed = u
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if streamed.CompletionTokens != 11 || resp.Usage.CompletionTokens != 7 {
		t.Fatalf("usage %+v and %+v", resp.Usage, streamed)
	}
	c.waitSettled(t)
	ex1 := waitIdle(t)

	// The conventions' attributes: the operation, the provider from the channel's format,
	// the public model asked for, and the model the provider answered with.
	attrs := []string{"gen_ai_operation_name", "chat", "gen_ai_provider_name", "openai",
		"gen_ai_request_model", "demo-chat", "gen_ai_response_model", "mock-gpt"}
	delta := func(s string) float64 { return ex1[s] - ex0[s] }
	for _, e := range []struct {
		name string
		kv   []string // labels besides attrs
		want float64
	}{
		{"gen_ai_client_token_usage_sum", []string{"gen_ai_token_type", "input"}, float64(resp.Usage.PromptTokens + streamed.PromptTokens)},
		{"gen_ai_client_token_usage_sum", []string{"gen_ai_token_type", "output"}, 7 + 11},
		{"gen_ai_client_token_usage_count", []string{"gen_ai_token_type", "output"}, 2},
		{"gen_ai_server_request_duration_seconds_count", nil, 2},
		{"gen_ai_server_time_to_first_token_seconds_count", nil, 2},
		// Only the streamed answer has a time per output token.
		{"gen_ai_server_time_per_output_token_seconds_count", nil, 1},
	} {
		s := genAISeries(ex1, e.name, append(append([]string(nil), attrs...), e.kv...)...)
		if s == "" {
			t.Errorf("no %s series with %v %v in extproc's /metrics", e.name, attrs, e.kv)
			continue
		}
		if got := delta(s); got != e.want {
			t.Errorf("%s moved by %v, want %v", s, got, e.want)
		}
	}
	if s := genAISeries(ex1, "gen_ai_server_request_duration_seconds_sum", attrs...); delta(s) <= 0 {
		t.Errorf("%s moved by %v", s, delta(s))
	}
}
