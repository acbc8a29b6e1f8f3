package metrics_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/llmgw/gateway/extproc/envoy"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/metrics"
	"github.com/llmgw/gateway/internal/telemetry"
	"github.com/llmgw/gateway/internal/telemetry/otlptest"
	dto "github.com/prometheus/client_model/go"
)

// genAIFixture is newFixture with the GenAI options given.
func genAIFixture(t testing.TB, opts ...metrics.Option) *fixture {
	t.Helper()
	f := newFixture(t)
	f.m = metrics.New(replay.DemoCatalog(t), opts...)
	f.svc = replay.Service(t, f.l, func(c *lifecycle.Config) { c.Observers = []lifecycle.Observer{f.m} })
	f.srv = envoy.New(f.svc, nil, envoy.WithObserver(f.m))
	return f
}

// bufferedChat is a buffered chat success: 12 tokens in, 34 out.
func bufferedChat() []*extprocv3.ProcessingRequest {
	return append(post("/v1/chat/completions", chat, auth()...),
		replay.ResponseHeaders(200, "content-type", "application/json"),
		replay.ResponseBody([]byte(`{"model":"mock-gpt-0613","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}}`), true))
}

// streamedChat is a streamed chat success of n content events: 9 tokens in, 2n out.
func streamedChat(n int) []*extprocv3.ProcessingRequest {
	msgs := append(post("/v1/chat/completions", `{"model":"demo-chat","stream":true,"max_tokens":4096,"messages":[{"role":"user","content":"hello"}]}`, auth()...),
		replay.ResponseHeaders(200, "content-type", "text/event-stream"))
	const head = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"mock-gpt-0613","choices":[`
	for i := range n {
		msgs = append(msgs, replay.ResponseBody([]byte(head+`{"index":0,"delta":{"content":" word`+strconv.Itoa(i)+`"},"finish_reason":null}]}`+"\n\n"), false))
	}
	last := head + `],"usage":{"prompt_tokens":9,"completion_tokens":` + strconv.Itoa(2*n) + `,"total_tokens":` + strconv.Itoa(9+2*n) + `}}` + "\n\ndata: [DONE]\n\n"
	return append(msgs, replay.ResponseBody([]byte(last), true))
}

// attrs are the GenAI attributes of a demo-chat request answered by mock-gpt-0613, as
// Prometheus labels.
func attrs(more ...string) []string {
	return append([]string{"gen_ai_operation_name", "chat", "gen_ai_provider_name", "openai",
		"gen_ai_request_model", "demo-chat", "gen_ai_response_model", "mock-gpt-0613"}, more...)
}

// histogram returns the one series of a histogram with labels, nil when none.
func histogram(t *testing.T, m *metrics.Metrics, name string, labels ...string) *dto.Histogram {
	t.Helper()
	for _, mt := range family(t, m, name).GetMetric() {
		if sameLabels(mt.GetLabel(), labels) {
			return mt.GetHistogram()
		}
	}
	return nil
}

func bounds(h *dto.Histogram) []float64 {
	var b []float64
	for _, bk := range h.GetBucket() {
		b = append(b, bk.GetUpperBound())
	}
	return b
}

func TestGenAIMetrics(t *testing.T) {
	f := genAIFixture(t)
	f.play(t, bufferedChat()...)
	f.play(t, streamedChat(8)...)
	// An upstream failure: recorded on the duration with its error.type, never as tokens.
	f.play(t, append(post("/v1/chat/completions", chat, auth()...),
		replay.ResponseHeaders(500, "content-type", "application/json"),
		replay.ResponseBody([]byte(`{"error":{"message":"boom","type":"server_error"}}`), true))...)
	// Refused before a channel was picked: no GenAI metric at all.
	f.play(t, post("/v1/chat/completions", chat)...)

	const tokens = "gen_ai_client_token_usage"
	in := histogram(t, f.m, tokens, attrs("gen_ai_token_type", "input")...)
	out := histogram(t, f.m, tokens, attrs("gen_ai_token_type", "output")...)
	if in.GetSampleCount() != 2 || in.GetSampleSum() != 12+9 {
		t.Errorf("input tokens: %d samples summing %v, want 2 summing 21", in.GetSampleCount(), in.GetSampleSum())
	}
	if out.GetSampleCount() != 2 || out.GetSampleSum() != 34+16 {
		t.Errorf("output tokens: %d samples summing %v, want 2 summing 50", out.GetSampleCount(), out.GetSampleSum())
	}
	if n := count(t, f.m, tokens); n != 2 {
		t.Errorf("%s has %d series, want 2 (input, output)", tokens, n)
	}
	wantTokenBounds := []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	if b := bounds(in); !slices.Equal(b, wantTokenBounds) {
		t.Errorf("token buckets %v, want %v", b, wantTokenBounds)
	}

	const dur = "gen_ai_server_request_duration_seconds"
	if h := histogram(t, f.m, dur, attrs()...); h.GetSampleCount() != 2 || h.GetSampleSum() <= 0 {
		t.Errorf("%s of the successes: %v", dur, h)
	} else if b := bounds(h); b[0] != 0.01 || b[len(b)-1] != 81.92 {
		t.Errorf("duration buckets %v", b)
	}
	failed := []string{"gen_ai_operation_name", "chat", "gen_ai_provider_name", "openai",
		"gen_ai_request_model", "demo-chat", "error_type", "upstream_error"}
	if h := histogram(t, f.m, dur, failed...); h.GetSampleCount() != 1 {
		t.Errorf("%s of the failure: %v", dur, h)
	}
	if n := count(t, f.m, dur); n != 2 {
		t.Errorf("%s has %d series, want 2 (successes, the failure)", dur, n)
	}
	if h := histogram(t, f.m, "gen_ai_server_time_to_first_token_seconds", attrs()...); h.GetSampleCount() != 2 {
		t.Errorf("time to first token: %v, want the two successes", h)
	} else if b := bounds(h); b[0] != 0.001 || b[len(b)-1] != 10 {
		t.Errorf("time to first token buckets %v", b)
	}
	// Only the streamed answer has a time per output token.
	if h := histogram(t, f.m, "gen_ai_server_time_per_output_token_seconds", attrs()...); h.GetSampleCount() != 1 {
		t.Errorf("time per output token: %v, want the streamed answer's", h)
	} else if b := bounds(h); b[0] != 0.01 || b[len(b)-1] != 2.5 {
		t.Errorf("time per output token buckets %v", b)
	}
	if n := count(t, f.m, "gen_ai_client_inference_operation_input_tokens"); n != 0 {
		t.Errorf("the latest conventions' names without the opt-in: %d series", n)
	}
}

func TestGenAILatestConventions(t *testing.T) {
	f := genAIFixture(t, metrics.WithLatestGenAI(true))
	f.play(t, bufferedChat()...)
	if n := count(t, f.m, "gen_ai_client_token_usage"); n != 0 {
		t.Errorf("gen_ai_client_token_usage has %d series under the opt-in", n)
	}
	for name, want := range map[string]float64{
		"gen_ai_client_inference_operation_input_tokens":  12,
		"gen_ai_client_inference_operation_output_tokens": 34,
	} {
		if h := histogram(t, f.m, name, attrs()...); h.GetSampleCount() != 1 || h.GetSampleSum() != want {
			t.Errorf("%s: %v, want one sample of %v", name, h, want)
		}
	}
}

// TestGenAIOverOTLP points the standard OTLP environment at an in-test receiver and
// finds the same GenAI histograms, with their attributes and token sums, in the push.
func TestGenAIOverOTLP(t *testing.T) {
	rcv := otlptest.Start()
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", "extproc-test")
	reader, err := telemetry.MetricReader(context.Background(), os.Getenv)
	if err != nil || reader == nil {
		t.Fatalf("reader %v, %v", reader, err)
	}
	res, err := telemetry.Resource("extproc")
	if err != nil {
		t.Fatal(err)
	}
	f := genAIFixture(t, metrics.WithReader(reader), metrics.WithResource(res))
	f.play(t, bufferedChat()...)
	f.play(t, streamedChat(4)...)
	if err := f.m.Shutdown(context.Background()); err != nil { // flushes the push
		t.Fatal(err)
	}

	points, service := rcv.Last()
	if len(points) == 0 {
		t.Fatal("no OTLP export received")
	}
	sums := map[string]float64{} // metric/token type → sum of its points
	counts := map[string]uint64{}
	for _, p := range points {
		kv := p.Attrs
		if kv["gen_ai.operation.name"] != "chat" || kv["gen_ai.provider.name"] != "openai" ||
			kv["gen_ai.request.model"] != "demo-chat" || kv["gen_ai.response.model"] != "mock-gpt-0613" {
			t.Errorf("%s point with attributes %v", p.Metric, kv)
		}
		key := p.Metric + "/" + kv["gen_ai.token.type"]
		sums[key] += p.Sum
		counts[key] += p.Count
		if p.Metric == "gen_ai.client.token.usage" && p.Unit != "{token}" {
			t.Errorf("token usage unit %q", p.Unit)
		}
	}
	if service != "extproc-test" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", service)
	}
	for key, want := range map[string]float64{"gen_ai.client.token.usage/input": 12 + 9, "gen_ai.client.token.usage/output": 34 + 8} {
		if sums[key] != want || counts[key] != 2 {
			t.Errorf("%s: %d points summing %v, want 2 summing %v", key, counts[key], sums[key], want)
		}
	}
	for _, name := range []string{"gen_ai.server.request.duration/", "gen_ai.server.time_to_first_token/"} {
		if counts[name] != 2 {
			t.Errorf("%s: %d samples, want 2", name, counts[name])
		}
	}
	if counts["gen_ai.server.time_per_output_token/"] != 1 {
		t.Errorf("time per output token: %d samples, want 1", counts["gen_ai.server.time_per_output_token/"])
	}
}
