package telemetry

import "testing"

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestMetricsEnabled(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_METRICS_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_METRICS_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317"}, false},
	} {
		if got := MetricsEnabled(env(c.env)); got != c.want {
			t.Errorf("%v: %v, want %v", c.env, got, c.want)
		}
	}
}

func TestLatestGenAI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "http": false, "gen_ai_latest_experimental": true,
		"http, gen_ai_latest_experimental": true, "gen_ai_latest_experimental_x": false} {
		if got := LatestGenAI(env(map[string]string{"OTEL_SEMCONV_STABILITY_OPT_IN": v})); got != want {
			t.Errorf("LatestGenAI(%q) = %v", v, got)
		}
	}
}
