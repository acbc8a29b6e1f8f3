package front

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	codecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/internal/testkit"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// channelAttr is the attribute the failover clusters' upstream ext_proc asks for.
const channelAttr = "xds.upstream_host_metadata.filter_metadata['llmgw']['channel']"

// attemptExtProc is the upstream ext_proc of the failover clusters (as extproc/xds
// builds it), on the static extproc cluster.
func attemptExtProc() *extprocv3.ExternalProcessor {
	return &extprocv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{
			TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "extproc"}},
			InitialMetadata: []*corev3.HeaderValue{{Key: "x-llmgw-stream", Value: "attempt"}},
		},
		ProcessingMode: &extprocv3.ProcessingMode{
			RequestHeaderMode: extprocv3.ProcessingMode_SEND, RequestBodyMode: extprocv3.ProcessingMode_NONE,
			ResponseHeaderMode: extprocv3.ProcessingMode_SEND, ResponseBodyMode: extprocv3.ProcessingMode_NONE,
			RequestTrailerMode: extprocv3.ProcessingMode_SKIP, ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
		},
		AllowModeOverride: true,
		MessageTimeout:    durationpb.New(2e9),
		RequestAttributes: []string{channelAttr},
	}
}

// withUpstreamFilters gives c the upstream filter chain filters (HTTP/1.1 upstream).
func withUpstreamFilters(t *testing.T, c *clusterv3.Cluster, filters ...any) *clusterv3.Cluster {
	t.Helper()
	var fs []*hcmv3.HttpFilter
	for _, f := range filters {
		var a *anypb.Any
		var err error
		switch v := f.(type) {
		case *extprocv3.ExternalProcessor:
			a, err = anypb.New(v)
		case *codecv3.UpstreamCodec:
			a, err = anypb.New(v)
		}
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, &hcmv3.HttpFilter{Name: "f", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}})
	}
	po, err := anypb.New(&httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}},
		}},
		HttpFilters: fs,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": po}
	return c
}

// failoverCluster is a failover-like cluster: eps at their priorities, endpoint i
// naming channel "ch<i>" in llmgw metadata, with the attempt filter chain.
func failoverCluster(t *testing.T, name string, eps ...ep) *clusterv3.Cluster {
	c := endpointsCluster(name, eps...)
	for i, loc := range c.GetLoadAssignment().GetEndpoints() {
		md, _ := structpb.NewStruct(map[string]any{"channel": "ch" + string(rune('0'+i))})
		loc.GetLbEndpoints()[0].Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"llmgw": md}}
	}
	return withUpstreamFilters(t, c, attemptExtProc(), &codecv3.UpstreamCodec{})
}

// attemptRecord is what the fake saw on one attempt stream.
type attemptRecord struct {
	mu      sync.Mutex
	md      metadata.MD
	channel string
	msgs    []*extprocsvc.ProcessingRequest
	done    chan struct{}
}

func (r *attemptRecord) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.msgs {
		switch {
		case m.GetRequestHeaders() != nil:
			out = append(out, "request_headers")
		case m.GetResponseHeaders() != nil:
			out = append(out, "response_headers")
		case m.GetResponseBody() != nil:
			out = append(out, "response_body")
		default:
			out = append(out, "other")
		}
	}
	return out
}

// attemptFake is a fake extproc serving both kinds of stream: a request's (routes to
// cluster, setting extra) and an attempt's (answered by onAttempt, recorded).
type attemptFake struct {
	mu       sync.Mutex
	attempts []*attemptRecord
}

func (f *attemptFake) records() []*attemptRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*attemptRecord(nil), f.attempts...)
}

func (f *attemptFake) handler(cluster string, extra []*corev3.HeaderValueOption, onAttempt func(rec *attemptRecord, m *extprocsvc.ProcessingRequest) *extprocsvc.ProcessingResponse) func(s *session) error {
	downstream := routingProc(cluster, extra...)
	return func(s *session) error {
		md, _ := metadata.FromIncomingContext(s.stream.Context())
		if v := md.Get("x-llmgw-stream"); len(v) != 1 || v[0] != "attempt" {
			return downstream(s)
		}
		rec := &attemptRecord{md: md, done: make(chan struct{})}
		f.mu.Lock()
		f.attempts = append(f.attempts, rec)
		f.mu.Unlock()
		defer close(rec.done)
		for m := s.next(); m != nil; m = s.next() {
			rec.mu.Lock()
			rec.msgs = append(rec.msgs, m)
			if m.GetRequestHeaders() != nil {
				rec.channel = m.GetAttributes()["envoy.filters.http.ext_proc"].GetFields()[channelAttr].GetStringValue()
			}
			rec.mu.Unlock()
			if r := onAttempt(rec, m); r != nil {
				if err := s.send(r); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// rewriteFor answers an attempt's request headers with its channel's request
// (CONTINUE_AND_REPLACE), asks for the body of an error, turns a 429 into the
// router's retriable 503, and lets anything else pass.
func rewriteFor(rec *attemptRecord, m *extprocsvc.ProcessingRequest) *extprocsvc.ProcessingResponse {
	switch {
	case m.GetRequestHeaders() != nil:
		return reqHeadersReply(&extprocsvc.CommonResponse{
			Status: extprocsvc.CommonResponse_CONTINUE_AND_REPLACE,
			HeaderMutation: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
				setHeader(":path", "/"+rec.channel+"/chat"), setHeader("authorization", "Bearer key-"+rec.channel),
			}},
			BodyMutation: &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_Body{Body: []byte(`{"for":"` + rec.channel + `"}`)}},
		})
	case m.GetResponseHeaders() != nil:
		r := respHeadersReply(nil)
		if headerMap(m.GetResponseHeaders().GetHeaders())[":status"][0] != "200" {
			r.ModeOverride = &extprocv3.ProcessingMode{
				RequestHeaderMode: extprocv3.ProcessingMode_SEND, ResponseHeaderMode: extprocv3.ProcessingMode_SEND,
				RequestBodyMode: extprocv3.ProcessingMode_NONE, ResponseBodyMode: extprocv3.ProcessingMode_BUFFERED,
				RequestTrailerMode: extprocv3.ProcessingMode_SKIP, ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
			}
		}
		return r
	case m.GetResponseBody() != nil:
		return respBodyReply(&extprocsvc.CommonResponse{HeaderMutation: &extprocsvc.HeaderMutation{
			SetHeaders: []*corev3.HeaderValueOption{setHeader(":status", "503"), setHeader("x-attempt-failure", "quota")},
		}})
	}
	return nil
}

// upstreamLog records what each upstream received.
type upstreamSeen struct {
	path, auth, body string
	contentLength    int64
	chunked          bool
}

func recordingUpstream(t *testing.T, seen chan<- upstreamSeen, status int, body string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- upstreamSeen{path: r.URL.Path, auth: r.Header.Get("Authorization"), body: string(b),
			contentLength: r.ContentLength, chunked: len(r.TransferEncoding) > 0 && r.TransferEncoding[0] == "chunked"}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// TestUpstreamExtProcFailover: attempt 1 answers 429 with a JSON body; the attempt's
// ext_proc asks for the body and turns it into the retriable 503, so the router
// retries; attempt 2's connection is refused (its stream sees only the request
// headers); attempt 3 answers 200, which goes downstream. Each attempt has its own
// stream, marked by the initial metadata and told its endpoint's channel; each
// upstream gets the body, path and credential its attempt's CONTINUE_AND_REPLACE set,
// without content-length (chunked).
func TestUpstreamExtProcFailover(t *testing.T) {
	seen := make(chan upstreamSeen, 8)
	cl := failoverCluster(t, "failover",
		ep{addr: recordingUpstream(t, seen, 429, `{"error":{"code":"insufficient_quota"}}`), priority: 0},
		ep{addr: refusedAddr(t), priority: 1},
		ep{addr: recordingUpstream(t, seen, 200, `{"answer":"from ch2"}`), priority: 2},
	)
	fake := &attemptFake{}
	h := newHarnessClusters(t, nil, fake.handler("failover", []*corev3.HeaderValueOption{setHeader("x-envoy-max-retries", "2")}, rewriteFor),
		withRetryPolicy(failoverRetryPolicy(t)), cl)
	status, _, got := h.do(t, http.MethodPost, "/v1/chat/completions", map[string]string{"Content-Type": "application/json"},
		strings.NewReader(`{"model":"public","messages":[]}`))
	if status != 200 || string(got) != `{"answer":"from ch2"}` {
		t.Fatalf("client got %d %s, want ch2's answer", status, got)
	}
	close(seen)
	var ups []upstreamSeen
	for s := range seen {
		ups = append(ups, s)
	}
	if len(ups) != 2 {
		t.Fatalf("upstreams reached %d times, want 2 (ch0 and ch2)", len(ups))
	}
	for i, ch := range []string{"ch0", "ch2"} {
		u := ups[i]
		if u.path != "/"+ch+"/chat" || u.auth != "Bearer key-"+ch || u.body != `{"for":"`+ch+`"}` {
			t.Errorf("upstream %s received %+v, want its attempt's request", ch, u)
		}
		if u.contentLength != -1 || !u.chunked {
			t.Errorf("upstream %s: content-length %d chunked %v: a replaced body goes without content-length", ch, u.contentLength, u.chunked)
		}
	}
	recs := fake.records()
	if len(recs) != 3 {
		t.Fatalf("%d attempt streams, want 3", len(recs))
	}
	want := [][]string{{"request_headers", "response_headers", "response_body"}, {"request_headers"}, {"request_headers", "response_headers"}}
	for i, rec := range recs {
		select {
		case <-rec.done:
		case <-time.After(testkit.Deadline):
			t.Fatalf("attempt %d's stream never ended", i+1)
		}
		if rec.channel != "ch"+string(rune('0'+i)) {
			t.Errorf("attempt %d told channel %q", i+1, rec.channel)
		}
		if got := rec.kinds(); strings.Join(got, ",") != strings.Join(want[i], ",") {
			t.Errorf("attempt %d messages %v, want %v", i+1, got, want[i])
		}
		rh := headerMap(rec.msgs[0].GetRequestHeaders().GetHeaders())
		if len(rh["x-request-id"]) != 1 || len(rh["x-envoy-max-retries"]) != 0 || rh[":path"][0] != "/v1/chat/completions" {
			t.Errorf("attempt %d request headers %v: want the routed request (x-request-id, retry headers consumed)", i+1, rh)
		}
	}
	if b := recs[0].msgs[2].GetResponseBody(); string(b.GetBody()) != `{"error":{"code":"insufficient_quota"}}` || !b.GetEndOfStream() {
		t.Errorf("attempt 1 body message %v, want the whole error body", b)
	}
	if a := recs[0].msgs[0]; a.GetProtocolConfig() == nil || len(a.GetAttributes()) != 1 {
		t.Errorf("first message lacks protocol_config or attributes: %v", a)
	}
	if a := recs[0].msgs[1]; a.GetAttributes() != nil {
		t.Errorf("response headers carry attributes: %v", a.GetAttributes())
	}
}

// TestUpstreamExtProcStatusDrivesRetry: a 200 that the attempt's ext_proc turns into
// 503 (after reading its body) is retried, and one it leaves alone is not; the final
// status is the one the filters left.
func TestUpstreamExtProcStatusDrivesRetry(t *testing.T) {
	seen := make(chan upstreamSeen, 8)
	cl := failoverCluster(t, "failover",
		ep{addr: recordingUpstream(t, seen, 400, `{"error":"credit balance is too low"}`), priority: 0},
		ep{addr: recordingUpstream(t, seen, 400, `{"error":"credit balance is too low"}`), priority: 1},
	)
	fake := &attemptFake{}
	h := newHarnessClusters(t, nil, fake.handler("failover", []*corev3.HeaderValueOption{setHeader("x-envoy-max-retries", "1")}, rewriteFor),
		withRetryPolicy(failoverRetryPolicy(t)), cl)
	status, hdr, _ := h.do(t, http.MethodPost, "/v1/chat/completions", nil, strings.NewReader(`{}`))
	if status != 503 || hdr.Get("X-Attempt-Failure") != "quota" {
		t.Fatalf("client got %d %v, want the last attempt's rewritten 503", status, hdr)
	}
	if n := len(fake.records()); n != 2 {
		t.Errorf("%d attempts, want 2 (one retry allowed)", n)
	}
}

// TestUpstreamExtProcImmediateResponse: an immediate response of the attempt's ext_proc
// is the client's answer, with no upstream reached and no retry.
func TestUpstreamExtProcImmediateResponse(t *testing.T) {
	seen := make(chan upstreamSeen, 8)
	cl := failoverCluster(t, "failover",
		ep{addr: recordingUpstream(t, seen, 200, "ch0"), priority: 0},
		ep{addr: recordingUpstream(t, seen, 200, "ch1"), priority: 1},
	)
	fake := &attemptFake{}
	h := newHarnessClusters(t, nil, fake.handler("failover", []*corev3.HeaderValueOption{setHeader("x-envoy-max-retries", "1")},
		func(_ *attemptRecord, m *extprocsvc.ProcessingRequest) *extprocsvc.ProcessingResponse {
			if m.GetRequestHeaders() != nil {
				return immediate(429, `{"error":"channel already tried"}`, "attempt refused")
			}
			return nil
		}), withRetryPolicy(failoverRetryPolicy(t)), cl)
	status, _, got := h.do(t, http.MethodPost, "/v1/chat/completions", nil, strings.NewReader(`{}`))
	// local_reply_config puts it in the gateway's envelope, as any local reply.
	if status != 429 {
		t.Fatalf("client got %d %s, want the immediate response's status", status, got)
	}
	if n := len(fake.records()); n != 1 {
		t.Errorf("%d attempts, want 1: an immediate response is never retried", n)
	}
	if len(seen) != 0 {
		t.Errorf("an upstream was reached")
	}
}

// TestUpstreamFilterRefusals: upstream filter settings the front does not emulate are
// NACKed over CDS, naming the setting.
func TestUpstreamFilterRefusals(t *testing.T) {
	h := newHarness(t, nil, routingProc("model"), nil)
	base := func() *clusterv3.Cluster { return endpointsCluster("model", ep{addr: "127.0.0.1:1"}) }
	with := func(mod func(*extprocv3.ExternalProcessor)) *clusterv3.Cluster {
		ep := attemptExtProc()
		mod(ep)
		return withUpstreamFilters(t, base(), ep, &codecv3.UpstreamCodec{})
	}
	cases := []struct {
		name string
		c    *clusterv3.Cluster
		want string
	}{
		{"codec alone", withUpstreamFilters(t, base(), &codecv3.UpstreamCodec{}), "exactly [ext_proc, upstream_codec]"},
		{"no codec", withUpstreamFilters(t, base(), attemptExtProc()), "must be envoy.filters.http.upstream_codec"},
		{"failure_mode_allow", with(func(e *extprocv3.ExternalProcessor) { e.FailureModeAllow = true }), "failure_mode_allow"},
		{"request body", with(func(e *extprocv3.ExternalProcessor) {
			e.ProcessingMode.RequestBodyMode = extprocv3.ProcessingMode_BUFFERED
		}), "processing_mode"},
		{"attribute", with(func(e *extprocv3.ExternalProcessor) { e.RequestAttributes = []string{"request.path"} }), "request.path"},
		{"max_message_timeout", with(func(e *extprocv3.ExternalProcessor) { e.MaxMessageTimeout = durationpb.New(1e9) }), "max_message_timeout not emulated"},
		{"dynamic grpc cluster", with(func(e *extprocv3.ExternalProcessor) {
			e.GrpcService.TargetSpecifier = &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "mock-providers"}}
		}), "not a static cluster"},
	}
	for _, c := range cases {
		h.cds.set(t, testCluster("mock-providers", h.upstream.Listener.Addr().String()), c.c)
		// NACKs of earlier versions may still be queued: wait for this one's.
		deadline := time.After(testkit.Deadline)
	wait:
		for {
			select {
			case msg := <-h.cds.nacks:
				if strings.Contains(msg, "model") && strings.Contains(msg, c.want) {
					break wait
				}
			case <-deadline:
				t.Errorf("%s: no NACK naming %q", c.name, c.want)
				break wait
			}
		}
	}
	// The connection manager's ext_proc takes neither initial metadata nor attributes.
	b := loadBootstrap(t)
	b.ExtProc(func(ep *extprocv3.ExternalProcessor) {
		ep.GrpcService.InitialMetadata = []*corev3.HeaderValue{{Key: "a", Value: "b"}}
	})
	if _, err := FromBootstrap(b.Parsed()); err == nil || !strings.Contains(err.Error(), "initial_metadata") {
		t.Errorf("downstream initial_metadata: error %v", err)
	}
}
