package tracing

import (
	"context"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
)

func TestEnabledOnlyWhenTheEnvironmentAsks(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want bool
	}{
		{env: nil, want: false},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, want: false},
	} {
		if got := Enabled(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("%v: enabled %v, want %v", tt.env, got, tt.want)
		}
	}
}

// TestConsoleExporterWritesSpans: OTEL_TRACES_EXPORTER=console, the local recipe, puts
// every finished span on standard error with its trace id.
func TestConsoleExporterWritesSpans(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = f
	defer func() { os.Stderr = stderr }()
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)

	ctx := context.Background()
	shutdown, err := Setup(ctx, "tracing-test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(ctx, "local-recipe")
	traceID := span.SpanContext().TraceID().String()
	span.End()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Name":"local-recipe"`, traceID, "tracing-test"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("console output lacks %s: %s", want, b)
		}
	}
}
