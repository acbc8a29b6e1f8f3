// Package telemetry reads the standard OpenTelemetry environment for a process's
// metrics: whether they are also pushed over OTLP, and which version of the GenAI
// semantic conventions to emit. It only builds the reader; the instruments and their
// Prometheus exposition belong to the process's metrics package (extproc/metrics).
// It must not import any gateway package.
//
//   - OTEL_METRICS_EXPORTER=otlp, or OTEL_EXPORTER_OTLP_ENDPOINT /
//     OTEL_EXPORTER_OTLP_METRICS_ENDPOINT set (and OTEL_METRICS_EXPORTER not "none"),
//     pushes metrics over OTLP every OTEL_METRIC_EXPORT_INTERVAL (the SDK reads it;
//     60 s by default). OTEL_EXPORTER_OTLP_METRICS_PROTOCOL (else
//     OTEL_EXPORTER_OTLP_PROTOCOL) picks the transport: "http/protobuf", or gRPC (the
//     default, as for traces, internal/tracing). The exporters read the other
//     OTEL_EXPORTER_OTLP_* variables (headers, TLS, timeout, temporality) themselves.
//   - OTEL_SEMCONV_STABILITY_OPT_IN containing gen_ai_latest_experimental asks for the
//     latest experimental GenAI metric names instead of the v1.36 ones.
package telemetry

import (
	"context"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// MetricsEnabled reports whether the environment (getenv) asks for OTLP metric export.
func MetricsEnabled(getenv func(string) string) bool {
	switch getenv("OTEL_METRICS_EXPORTER") {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != ""
}

// LatestGenAI reports whether OTEL_SEMCONV_STABILITY_OPT_IN asks for the latest
// experimental GenAI conventions (a comma-separated list holding
// gen_ai_latest_experimental).
func LatestGenAI(getenv func(string) string) bool {
	return slices.ContainsFunc(strings.Split(getenv("OTEL_SEMCONV_STABILITY_OPT_IN"), ","), func(s string) bool {
		return strings.TrimSpace(s) == "gen_ai_latest_experimental"
	})
}

// MetricReader returns the periodic OTLP reader the environment asks for, nil when it
// asks for none. Shut the reader down (through its meter provider) to flush.
func MetricReader(ctx context.Context, getenv func(string) string) (sdkmetric.Reader, error) {
	if !MetricsEnabled(getenv) {
		return nil, nil
	}
	proto := getenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var (
		exp sdkmetric.Exporter
		err error
	)
	if proto == "http/protobuf" {
		exp, err = otlpmetrichttp.New(ctx)
	} else {
		exp, err = otlpmetricgrpc.New(ctx)
	}
	if err != nil {
		return nil, err
	}
	return sdkmetric.NewPeriodicReader(exp), nil
}

// Resource names the process service (unless OTEL_SERVICE_NAME does) with the
// attributes of OTEL_RESOURCE_ATTRIBUTES.
func Resource(service string) (*resource.Resource, error) {
	return resource.Merge(resource.NewSchemaless(semconv.ServiceName(service)), resource.Environment())
}
