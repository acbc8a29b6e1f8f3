package lifecycle

import (
	"context"
	"strings"

	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/credential"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of extproc's spans.
const TracerName = "github.com/llmgw/gateway/extproc"

// Attributes of ours on the request's spans (the gen_ai.* ones follow the OpenTelemetry
// GenAI semantic conventions).
const (
	AttrPublicModel = attribute.Key("gateway.public_model")
	AttrChannel     = attribute.Key("gateway.channel")
	AttrHold        = attribute.Key("gateway.hold_micros")
	AttrCharge      = attribute.Key("gateway.charge_micros")
	AttrOutcome     = attribute.Key("gateway.outcome")
	AttrRequestID   = attribute.Key("gateway.request_id")
)

// reqTrace is one request's trace: a root span from the request headers to the end of
// its settlement, with children for admission (the ledger calls, through the gRPC client
// instrumentation, below it), the upstream attempt and the settlement. The tracer is the
// global provider's (a no-op unless the process configured an exporter). Nothing from
// the request's body or credentials is ever put on a span: models, channel, token
// counts and money only.
type reqTrace struct {
	ctx       context.Context // carries root
	root      trace.Span
	admission trace.Span
	upstream  trace.Span
	settling  bool // a settlement span ends root
	ended     bool
}

// traceHeaders starts the request's trace, joining the client's W3C trace context
// (traceparent/tracestate in the request headers Envoy forwards), and returns ctx with
// the admission span.
func (r *Request) traceHeaders(ctx context.Context, headers []Header) context.Context {
	carrier := propagation.MapCarrier{}
	for _, h := range headers {
		if n := strings.ToLower(h.Name); n == "traceparent" || n == "tracestate" {
			carrier[n] = h.Value
		}
	}
	parent := propagation.TraceContext{}.Extract(context.Background(), carrier)
	tr := otel.GetTracerProvider().Tracer(TracerName)
	rctx, root := tr.Start(parent, "gateway.request", trace.WithSpanKind(trace.SpanKindServer))
	if !root.SpanContext().IsValid() {
		// No trace at all (tracing off and no client context): nothing to record or to
		// pass on, so no span is made. A trace that is not sampled still goes on: its
		// context travels with the ledger calls, so accounting does not sample them as
		// traces of their own.
		return ctx
	}
	_, adm := tr.Start(rctx, "gateway.admission")
	r.tr = &reqTrace{ctx: rctx, root: root, admission: adm}
	return trace.ContextWithSpan(ctx, adm)
}

// traceCtx returns ctx carrying the request's open span (admission, else the root).
func (r *Request) traceCtx(ctx context.Context) context.Context {
	switch {
	case r.tr == nil:
		return ctx
	case r.tr.admission != nil:
		return trace.ContextWithSpan(ctx, r.tr.admission)
	default:
		return trace.ContextWithSpan(ctx, r.tr.root)
	}
}

// common are the attributes the root and upstream spans share.
func (r *Request) traceAttrs() []attribute.KeyValue {
	a := []attribute.KeyValue{AttrRequestID.String(r.requestID), semconv.GenAIOperationNameKey.String(operationName(r.endpoint))}
	if r.parsed.Model != "" {
		a = append(a, semconv.GenAIRequestModel(r.parsed.Model))
	}
	if r.model != nil {
		a = append(a, AttrPublicModel.String(r.model.ID))
	}
	if r.parsed.MaxOutput > 0 {
		a = append(a, semconv.GenAIRequestMaxTokens(int(r.parsed.MaxOutput)))
	}
	return a
}

// traceAdmitted ends the admission span once the request body was handled, and opens
// the upstream attempt's span when the request goes to a provider.
func (r *Request) traceAdmitted(refused bool) {
	if r.tr == nil || r.tr.admission == nil {
		return
	}
	adm := r.tr.admission
	r.tr.admission = nil
	if r.reservation != nil {
		adm.SetAttributes(AttrHold.Int64(r.reservation.Amount))
	}
	if refused {
		adm.SetStatus(codes.Error, "refused")
	}
	adm.End()
	r.tr.root.SetAttributes(r.traceAttrs()...)
	if refused || r.channel == nil {
		return
	}
	ch := r.channel
	_, up := otel.GetTracerProvider().Tracer(TracerName).Start(r.tr.ctx, string(operationName(r.endpoint))+" "+ch.UpstreamModel,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.GenAIOperationNameKey.String(operationName(r.endpoint)),
			semconv.GenAIProviderNameKey.String(providerName(ch)),
			semconv.GenAIRequestModel(ch.UpstreamModel), AttrChannel.String(ch.Name)))
	r.tr.upstream = up
	r.tr.root.SetAttributes(AttrChannel.String(ch.Name))
	if r.reservation != nil {
		r.tr.root.SetAttributes(AttrHold.Int64(r.reservation.Amount))
	}
}

// traceEnd ends the upstream span with what the provider reported, and the root unless
// a settlement is still landing (its span ends the root).
func (r *Request) traceEnd(cause string) {
	if r.tr == nil || r.tr.ended {
		return
	}
	r.tr.ended = true
	// Admission still open: the request never had a body phase (bodiless, or refused or
	// abandoned before its body). Its span ends here; no upstream span starts so late.
	if adm := r.tr.admission; adm != nil {
		r.tr.admission = nil
		adm.End()
		r.tr.root.SetAttributes(r.traceAttrs()...)
	}
	if up := r.tr.upstream; up != nil {
		r.tr.upstream = nil
		r.traceResponse(up, r.tr.root)
		up.End()
	}
	if !r.tr.settling {
		r.tr.root.SetAttributes(AttrOutcome.String(cause))
		r.tr.root.End()
	}
}

// traceResponse records on spans what the provider reported: its model id and its usage.
func (r *Request) traceResponse(spans ...trace.Span) {
	st := r.resp
	if st == nil || st.rw == nil {
		return
	}
	var attrs []attribute.KeyValue
	if m := st.rw.UpstreamModel(); m != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(m))
	}
	if u, ok := st.rw.Usage(); ok {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(int(u.InputTokens)), semconv.GenAIUsageOutputTokens(int(u.OutputTokens)))
	}
	for _, sp := range spans {
		sp.SetAttributes(attrs...)
	}
}

// settlementSpan is one settlement's span, a child of the request's root, which it ends.
type settlementSpan struct {
	span trace.Span
	root trace.Span
}

// traceSettlement starts the settlement span of a commit or a release.
func (r *Request) traceSettlement(op string) *settlementSpan {
	if r.tr == nil {
		return nil
	}
	r.tr.settling = true
	// The settlement ends the root when it lands, which may be before the request's end
	// (traceEnd): the provider's report goes on the root now, while it is open.
	r.traceResponse(r.tr.root)
	_, s := otel.GetTracerProvider().Tracer(TracerName).Start(r.tr.ctx, "gateway.settlement", trace.WithAttributes(attribute.String("gateway.settlement", op)))
	return &settlementSpan{span: s, root: r.tr.root}
}

// ctx returns ctx carrying the settlement span (the ledger call's parent).
func (s *settlementSpan) ctx(ctx context.Context) context.Context {
	if s == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, s.span)
}

// end records how the settlement landed and ends it and the root.
func (s *settlementSpan) end(outcome string, charged int64, err error) {
	if s == nil {
		return
	}
	if err != nil {
		s.span.RecordError(err)
		s.span.SetStatus(codes.Error, "settlement failed")
		outcome = "settlement_failed"
	}
	for _, sp := range []trace.Span{s.span, s.root} {
		sp.SetAttributes(AttrOutcome.String(outcome), AttrCharge.Int64(charged))
	}
	s.span.End()
	s.root.End()
}

// operationName is gen_ai.operation.name for an endpoint.
func operationName(e Endpoint) string {
	if op := e.spec().operation; op != "" {
		return op
	}
	return "generate_content"
}

// providerName is gen_ai.provider.name for a channel: the conventions' well-known value
// for its format, Azure OpenAI told from OpenAI by its credential header (api-key) or
// its cluster's name.
// A format the conventions have no value for is named by itself.
func providerName(ch *catalog.Channel) string {
	switch ch.Format {
	case "openai":
		if ch.CredentialHeader == credential.HeaderAPIKey || strings.Contains(ch.Cluster, "azure") {
			return "azure.ai.openai"
		}
		return "openai"
	case "anthropic":
		return "anthropic"
	case "gemini":
		return "gcp.gemini"
	case "vertex-gemini", "vertex-anthropic":
		return "gcp.vertex_ai"
	case "bedrock":
		return "aws.bedrock"
	}
	return string(ch.Format)
}
