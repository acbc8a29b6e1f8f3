// Package tracing turns OpenTelemetry tracing on for a gateway process when the
// standard environment asks for it, and leaves it off (the global no-op provider)
// otherwise:
//
//   - OTEL_TRACES_EXPORTER=otlp, or OTEL_EXPORTER_OTLP_ENDPOINT /
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set (and OTEL_TRACES_EXPORTER not "none"),
//     exports spans over OTLP/gRPC; the exporter reads the other OTEL_EXPORTER_OTLP_*
//     variables (headers, TLS, timeout) itself;
//   - OTEL_TRACES_EXPORTER=console writes each finished span as one JSON line on
//     standard error, the way to look at a trace locally without a collector;
//   - OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the process as usual.
//
// When on, the W3C trace context propagator is installed, so the gRPC instrumentation
// (otelgrpc) carries a request's trace from extproc to accounting.
package tracing

import (
	"context"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// Enabled reports whether the environment (getenv) asks for trace export.
func Enabled(getenv func(string) string) bool {
	switch getenv("OTEL_TRACES_EXPORTER") {
	case "none":
		return false
	case "otlp", "console":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs a batching tracer provider as the global one when the process
// environment asks for it (OTLP/gRPC, or the console), naming the process service
// (unless OTEL_SERVICE_NAME does).
// shutdown flushes the spans still queued; it is a no-op when tracing is off.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	if !Enabled(os.Getenv) {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := exporter(ctx, os.Getenv("OTEL_TRACES_EXPORTER"))
	if err != nil {
		return nil, err
	}
	res, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName(service)), resource.Environment())
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}

// exporter is the span exporter OTEL_TRACES_EXPORTER names (Enabled has said yes).
func exporter(ctx context.Context, name string) (sdktrace.SpanExporter, error) {
	if name == "console" {
		return stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	}
	return otlptracegrpc.New(ctx)
}
