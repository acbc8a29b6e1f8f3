package tracing

import "testing"

func TestEnabledOnlyWhenTheEnvironmentAsks(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want bool
	}{
		{env: nil, want: false},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, want: false},
	} {
		if got := Enabled(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("%v: enabled %v, want %v", tt.env, got, tt.want)
		}
	}
}
