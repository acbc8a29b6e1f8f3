package envoy_test

import (
	"context"
	"encoding/hex"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/prototext"
)

// collector is an in-process OTLP/gRPC trace collector.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
	raw   []string // every export request, as text
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raw = append(c.raw, prototext.Format(req))
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// startCollector serves a collector and installs a global tracer provider exporting to
// it over OTLP/gRPC (synchronously) with the W3C propagator, as tracing.Setup does.
func startCollector(t *testing.T) (*collector, *sdktrace.TracerProvider) {
	t.Helper()
	c := &collector{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, c)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(lis.Addr().String()), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	})
	return c, tp
}

func attrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.GetAttributes() {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = "int_value:" + strconv.FormatInt(v.IntValue, 10)
		}
	}
	return m
}

// TestOneTracePerRequest: a paid chat request through extproc and the real accounting
// gRPC service, with the client's traceparent, gives one trace joined to the client's:
// the request span, its admission, the ledger calls on both sides of gRPC (accounting's
// server spans included), the upstream attempt and the settlement, with the GenAI and
// gateway attributes; no span carries the API key or the prompt.
func TestOneTracePerRequest(t *testing.T) {
	c, tp := startCollector(t)
	s := startRealWith(t, servertest.Options{ServerOptions: []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler())}},
		ledgerclient.DialOptions(true)...)
	acct := s.account(t, "default", 1_000_000)
	_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent  = "00f067aa0ba902b7"
		prompt  = "tell me about the secret garden of zanzibar"
		reqID   = "0b6c5bde-3f0a-4c47-9b59-6d1d3f7a1c11"
	)
	body := `{"model":"demo-chat","max_tokens":50,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	x, _, resp := s.h.Post(t, "/v1/chat/completions", []byte(body), "authorization", "Bearer "+key,
		"traceparent", "00-"+traceID+"-"+parent+"-01", "x-request-id", reqID)
	if resp.GetRequestBody() == nil {
		t.Fatalf("refused: %v", resp)
	}
	x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
	x.Send(replay.ResponseBody([]byte(`{"model":"mock-gpt-0613","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7}}`), true))
	x.Close()
	// A request without a traceparent starts a trace of its own.
	const reqID2 = "5e0d2a41-7d5b-4d0e-8f3c-2a9b8c7d6e5f"
	x2, _, _ := s.h.Post(t, "/v1/chat/completions", []byte(body), "authorization", "Bearer "+key, "x-request-id", reqID2)
	x2.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
	x2.Send(replay.ResponseBody([]byte(`{"model":"mock-gpt","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7}}`), true))
	x2.Close()
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	byName := map[string][]*tracepb.Span{}
	traces := map[string]bool{}
	for _, sp := range c.spans {
		if hex.EncodeToString(sp.GetTraceId()) != traceID {
			continue // another test's stream
		}
		traces[hex.EncodeToString(sp.GetTraceId())] = true
		byName[sp.GetName()] = append(byName[sp.GetName()], sp)
	}
	for _, n := range []string{"gateway.request", "gateway.admission", "chat mock-gpt", "gateway.settlement",
		"accounting.v1.LedgerService/Reserve", "accounting.v1.LedgerService/Commit"} {
		if len(byName[n]) == 0 {
			names := []string{}
			for k := range byName {
				names = append(names, k)
			}
			t.Fatalf("no %q span in the trace; spans: %v", n, names)
		}
	}
	root := byName["gateway.request"]
	if len(root) != 1 {
		t.Fatalf("%d request spans, want 1", len(root))
	}
	if hex.EncodeToString(root[0].GetParentSpanId()) != parent {
		t.Errorf("request span's parent %x, want the client's %s", root[0].GetParentSpanId(), parent)
	}
	rootID := string(root[0].GetSpanId())
	for _, n := range []string{"gateway.admission", "chat mock-gpt", "gateway.settlement"} {
		if p := string(byName[n][0].GetParentSpanId()); p != rootID {
			t.Errorf("%s is not a child of the request span", n)
		}
	}
	// Accounting's server spans sit under extproc's client spans of the same call.
	clientIDs := map[string]bool{}
	for _, sp := range c.spans {
		if sp.GetKind() == tracepb.Span_SPAN_KIND_CLIENT && strings.HasPrefix(sp.GetName(), "accounting.v1.") {
			clientIDs[string(sp.GetSpanId())] = true
		}
	}
	for _, n := range []string{"accounting.v1.LedgerService/Reserve", "accounting.v1.LedgerService/Commit"} {
		server := false
		for _, sp := range byName[n] {
			if sp.GetKind() == tracepb.Span_SPAN_KIND_SERVER {
				server = true
				if !clientIDs[string(sp.GetParentSpanId())] {
					t.Errorf("%s server span is not joined to extproc's client span", n)
				}
			}
		}
		if !server {
			t.Errorf("no accounting server span for %s", n)
		}
	}
	ra := attrs(root[0])
	for k, want := range map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "demo-chat", "gateway.public_model": "demo-chat",
		"gateway.channel": "mock-demo-chat", "gateway.outcome": "committed", "gateway.request_id": reqID,
		"gen_ai.usage.input_tokens": "int_value:12", "gen_ai.usage.output_tokens": "int_value:7",
		"gen_ai.request.max_tokens": "int_value:50", "gen_ai.response.model": "mock-gpt-0613",
	} {
		if ra[k] != want {
			t.Errorf("request span %s = %q, want %q", k, ra[k], want)
		}
	}
	for _, k := range []string{"gateway.hold_micros", "gateway.charge_micros"} {
		if !strings.HasPrefix(ra[k], "int_value:") {
			t.Errorf("request span %s = %q", k, ra[k])
		}
	}
	ua := attrs(byName["chat mock-gpt"][0])
	for k, want := range map[string]string{"gen_ai.provider.name": "openai", "gen_ai.request.model": "mock-gpt",
		"gen_ai.response.model": "mock-gpt-0613", "gateway.channel": "mock-demo-chat"} {
		if ua[k] != want {
			t.Errorf("upstream span %s = %q, want %q", k, ua[k], want)
		}
	}
	own := 0
	for _, sp := range c.spans {
		if sp.GetName() == "gateway.request" && attrs(sp)["gateway.request_id"] == reqID2 {
			own++
			if len(sp.GetParentSpanId()) != 0 || hex.EncodeToString(sp.GetTraceId()) == traceID {
				t.Error("a request without traceparent joined another trace")
			}
		}
	}
	if own != 1 {
		t.Errorf("%d request spans for the request without traceparent, want 1", own)
	}
	all := strings.Join(c.raw, "\n")
	for _, secret := range []string{key, key[len(key)-12:], prompt, "zanzibar"} {
		if strings.Contains(all, secret) {
			t.Errorf("an exported span carries %q", secret)
		}
	}
}

// TestUnsampledTraceStaysUnsampled: a client's trace that is not sampled (traceparent
// flags 00) records no span anywhere: extproc makes none, and its ledger calls still
// carry the client's context, so accounting (parent-based sampling) makes none either
// instead of starting traces of its own.
func TestUnsampledTraceStaysUnsampled(t *testing.T) {
	c, tp := startCollector(t)
	s := startRealWith(t, servertest.Options{ServerOptions: []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler())}},
		ledgerclient.DialOptions(true)...)
	acct := s.account(t, "default", 1_000_000)
	_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
	body := `{"model":"demo-chat","max_tokens":50,"messages":[{"role":"user","content":"hello"}]}`
	x, _, resp := s.h.Post(t, "/v1/chat/completions", []byte(body), "authorization", "Bearer "+key,
		"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	if resp.GetRequestBody() == nil {
		t.Fatalf("refused: %v", resp)
	}
	x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
	x.Send(replay.ResponseBody([]byte(`{"model":"mock-gpt","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7}}`), true))
	x.Close()
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sp := range c.spans {
		switch sp.GetName() {
		case "gateway.request", "gateway.admission", "gateway.settlement",
			"accounting.v1.LedgerService/Reserve", "accounting.v1.LedgerService/Commit":
			t.Errorf("span %q recorded for an unsampled trace (trace %x, parent %x)", sp.GetName(), sp.GetTraceId(), sp.GetParentSpanId())
		}
	}
}
