package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmgw/gateway/extproc/lifecycle"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestRequestSpanHasTheResponseWhenTheSettlementEndsIt: a settlement that lands before
// the request's end ends the request's span; the provider's model and usage are on it
// all the same (they were set at the end, on a span already ended, and lost).
func TestRequestSpanHasTheResponseWhenTheSettlementEndsIt(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)

	svc := nopService(t)
	ctx := context.Background()
	body := []byte(`{"model":"demo-chat","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
	r := admitChat(t, svc, chatHeaders(body), body)
	r.ResponseHeaders(ctx, 200, []lifecycle.Header{{":status", "200"}, {"content-type", "application/json"}}, false)
	r.ResponseBody(ctx, []byte(`{"id":"c","object":"chat.completion","created":1,"model":"mock-gpt-0613","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`), true)

	root := func() sdktrace.ReadOnlySpan {
		for _, s := range rec.Ended() {
			if s.Name() == "gateway.request" {
				return s
			}
		}
		return nil
	}
	// The settlement lands (the ledger answers at once) and ends the root first.
	deadline := time.Now().Add(10 * time.Second)
	for root() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if root() == nil {
		t.Fatal("the settlement did not end the request's span")
	}
	r.End(ctx, "done")
	got := map[string]string{}
	for _, kv := range root().Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	for k, want := range map[string]string{"gen_ai.response.model": "mock-gpt-0613",
		"gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "7", "gateway.outcome": "committed"} {
		if got[k] != want {
			t.Errorf("request span %s = %q, want %q", k, got[k], want)
		}
	}
}
