package app

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/internal/telemetry/otlptest"
)

// TestGenAIMetricsOverOTLP: extproc started with the standard OTLP environment pushes
// the GenAI histograms of a streamed request, with the conventions' attributes and the
// usage's tokens, to an OTLP/HTTP receiver; the last push comes at exit.
func TestGenAIMetricsOverOTLP(t *testing.T) {
	rcv := otlptest.Start()
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000") // only the push at exit
	f := startDrainFixture(t, "30s")
	s := f.startStream(t)
	last := "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"mock-gpt\",\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":500}}\n\ndata: [DONE]\n\n"
	exchange(t, s, replay.ResponseBody([]byte(last), true))
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream ended with %v, want EOF", err)
	}
	f.cancel()
	if code := f.waitExit(t, 20*time.Second); code != 0 {
		t.Fatalf("exit %d; log:\n%s", code, f.logs.String())
	}

	points, service := rcv.Last()
	if service != "extproc" {
		t.Errorf("service.name %q, want extproc", service)
	}
	got := map[string]otlptest.Point{}
	for _, p := range points {
		if a := p.Attrs; a["gen_ai.operation.name"] != "chat" || a["gen_ai.provider.name"] != "openai" ||
			a["gen_ai.request.model"] != "demo-chat" || a["gen_ai.response.model"] != "mock-gpt" || a["error.type"] != "" {
			t.Errorf("%s point with attributes %v", p.Metric, a)
		}
		got[p.Metric+"/"+p.Attrs["gen_ai.token.type"]] = p
	}
	for key, want := range map[string]float64{"gen_ai.client.token.usage/input": 20, "gen_ai.client.token.usage/output": 500} {
		if p := got[key]; p.Count != 1 || p.Sum != want {
			t.Errorf("%s: %d points summing %v, want 1 of %v", key, p.Count, p.Sum, want)
		}
	}
	for _, key := range []string{"gen_ai.server.request.duration/", "gen_ai.server.time_to_first_token/", "gen_ai.server.time_per_output_token/"} {
		if p := got[key]; p.Count != 1 || p.Sum <= 0 {
			t.Errorf("%s: %d points summing %v, want 1", key, p.Count, p.Sum)
		}
	}
}
