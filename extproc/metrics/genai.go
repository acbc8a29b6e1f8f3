package metrics

// The GenAI metrics of the OpenTelemetry semantic conventions, recorded from each
// request's Record (Observe) through an OpenTelemetry meter: one set of instruments,
// read by the Prometheus exporter into the registry /metrics serves, and, when the
// environment asks for it (internal/telemetry), by a periodic OTLP reader too. Nothing
// is counted twice: the gateway_* series stay Prometheus collectors of their own, and
// the gen_ai_* series exist only as these instruments.

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/prometheus/client_golang/prometheus"
)

// MeterName is the instrumentation scope of extproc's GenAI metrics.
const MeterName = "github.com/llmgw/gateway/extproc"

// Bucket boundaries the conventions advise.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	ttftBuckets     = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	tpotBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
)

// Option configures New.
type Option func(*options)

type options struct {
	readers []sdkmetric.Reader
	latest  bool
	res     *resource.Resource
}

// WithReader adds a reader of the GenAI instruments besides the Prometheus one (the
// OTLP reader internal/telemetry builds); nil adds none.
func WithReader(r sdkmetric.Reader) Option {
	return func(o *options) {
		if r != nil {
			o.readers = append(o.readers, r)
		}
	}
}

// WithLatestGenAI emits the latest experimental GenAI token metrics
// (gen_ai.client.inference.operation.input_tokens and .output_tokens) instead of
// gen_ai.client.token.usage (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental).
func WithLatestGenAI(latest bool) Option { return func(o *options) { o.latest = latest } }

// WithResource names the process on what the OTLP reader exports.
func WithResource(r *resource.Resource) Option { return func(o *options) { o.res = r } }

// genAI holds the GenAI instruments.
type genAI struct {
	provider *sdkmetric.MeterProvider
	latest   bool
	// tokens is gen_ai.client.token.usage; input and output its latest replacements.
	tokens, input, output metric.Int64Histogram
	duration, ttft, tpot  metric.Float64Histogram
	// sets caches attribute sets by seriesKey.
	sets sync.Map
}

// newGenAI makes the instruments on a meter provider read by a Prometheus exporter
// registered on reg, and by o's readers.
func newGenAI(reg prometheus.Registerer, o options) (*genAI, error) {
	prom, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, err
	}
	popts := []sdkmetric.Option{sdkmetric.WithReader(prom)}
	for _, r := range o.readers {
		popts = append(popts, sdkmetric.WithReader(r))
	}
	if o.res != nil {
		popts = append(popts, sdkmetric.WithResource(o.res))
	}
	g := &genAI{provider: sdkmetric.NewMeterProvider(popts...), latest: o.latest}
	mt := g.provider.Meter(MeterName)
	tokens := func(name, desc string) metric.Int64Histogram {
		h, _ := mt.Int64Histogram(name, metric.WithUnit("{token}"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(tokenBuckets...))
		return h
	}
	seconds := func(name, desc string, b []float64) metric.Float64Histogram {
		h, _ := mt.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(b...))
		return h
	}
	if o.latest {
		g.input = tokens("gen_ai.client.inference.operation.input_tokens", "Input tokens billed per request.")
		g.output = tokens("gen_ai.client.inference.operation.output_tokens", "Output tokens billed per request.")
	} else {
		g.tokens = tokens("gen_ai.client.token.usage", "Input and output tokens billed per request.")
	}
	g.duration = seconds("gen_ai.server.request.duration", "Time from the request's start to the end of its answer.", durationBuckets)
	g.ttft = seconds("gen_ai.server.time_to_first_token", "Time from a successful request's start to the first bytes of its answer's body.", ttftBuckets)
	g.tpot = seconds("gen_ai.server.time_per_output_token", "Time per output token after the first, of a successful streamed answer.", tpotBuckets)
	return g, nil
}

// seriesKey is one combination of a request's GenAI attribute values.
type seriesKey struct {
	op, provider, model, response, errType string
}

// seriesSets are a combination's attribute sets as measurement options, made once
// (attribute.NewSet sorts, hashes and allocates; the values are bounded, so the cache is
// too).
type seriesSets struct {
	all     metric.MeasurementOption // every attribute, error.type included
	in, out metric.MeasurementOption // gen_ai.client.token.usage's, by gen_ai.token.type
}

func (g *genAI) setsOf(k seriesKey) *seriesSets {
	if v, ok := g.sets.Load(k); ok {
		return v.(*seriesSets)
	}
	base := []attribute.KeyValue{semconv.GenAIOperationNameKey.String(k.op),
		semconv.GenAIProviderNameKey.String(k.provider), semconv.GenAIRequestModel(k.model)}
	if k.response != "" {
		base = append(base, semconv.GenAIResponseModel(k.response))
	}
	all := base
	if k.errType != "" {
		all = append(all[:len(all):len(all)], semconv.ErrorTypeKey.String(k.errType))
	}
	ss := &seriesSets{all: metric.WithAttributeSet(attribute.NewSet(all...)),
		in:  metric.WithAttributeSet(attribute.NewSet(append(base[:len(base):len(base)], semconv.GenAITokenTypeInput)...)),
		out: metric.WithAttributeSet(attribute.NewSet(append(base[:len(base):len(base)], semconv.GenAITokenTypeOutput)...))}
	v, _ := g.sets.LoadOrStore(k, ss)
	return v.(*seriesSets)
}

// observe records a request routed to a provider: model is already bounded (the
// caller's label), errType is "" for a success. gen_ai.client.token.usage carries no
// error.type.
func (g *genAI) observe(rec *lifecycle.Record, model, errType string) {
	ss := g.setsOf(seriesKey{rec.Operation, rec.Provider, model, truncate(rec.ResponseModel, maxModelLabel), errType})
	ctx := context.Background()
	all := ss.all
	t := &rec.Timing
	if !t.Start.IsZero() && !t.End.IsZero() {
		g.duration.Record(ctx, t.End.Sub(t.Start).Seconds(), all)
	}
	s := &rec.Settlement
	if s.Landed() && s.Outcome == lifecycle.OutcomeCommit && s.Usage.Units == nil {
		if g.latest {
			g.input.Record(ctx, s.Usage.InputTokens, all)
			g.output.Record(ctx, s.Usage.OutputTokens, all)
		} else {
			g.tokens.Record(ctx, s.Usage.InputTokens, ss.in)
			g.tokens.Record(ctx, s.Usage.OutputTokens, ss.out)
		}
	}
	if errType != "" || t.FirstChunk.IsZero() {
		return
	}
	g.ttft.Record(ctx, t.FirstChunk.Sub(t.Start).Seconds(), all)
	if out := s.Usage.OutputTokens; rec.Stream && !t.LastChunk.IsZero() && out > 1 && s.Landed() {
		g.tpot.Record(ctx, t.LastChunk.Sub(t.FirstChunk).Seconds()/float64(out-1), all)
	}
}

// maxModelLabel bounds the provider's model id on a series.
const maxModelLabel = 128

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Shutdown flushes the OTLP reader, if any, and stops the meter provider.
func (m *Metrics) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return m.genai.provider.Shutdown(ctx)
}
