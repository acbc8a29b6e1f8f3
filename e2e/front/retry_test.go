package front

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	omitcanaryv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/omit_canary_hosts/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previousprioritiesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/e2e/internal/bootstraptest"
	"github.com/llmgw/gateway/internal/testkit"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// failoverRetryPolicy is the route retry policy of the failover design (envoy.yaml's),
// with five retries where envoy.yaml has none without extproc's x-envoy-max-retries.
func failoverRetryPolicy(t testing.TB) *routev3.RetryPolicy {
	return &routev3.RetryPolicy{
		RetryOn:                       "connect-failure,reset,retriable-status-codes",
		RetriableStatusCodes:          []uint32{503},
		NumRetries:                    wrapperspb.UInt32(5),
		HostSelectionRetryMaxAttempts: 10,
		RetryPriority: &routev3.RetryPolicy_RetryPriority{
			Name: "envoy.retry_priorities.previous_priorities",
			ConfigType: &routev3.RetryPolicy_RetryPriority_TypedConfig{
				TypedConfig: bootstraptest.MustNew(t, &previousprioritiesv3.PreviousPrioritiesConfig{UpdateFrequency: 1})},
		},
		RetryHostPredicate: []*routev3.RetryPolicy_RetryHostPredicate{hostPredicate(t,
			"envoy.retry_host_predicates.previous_hosts", &previoushostsv3.PreviousHostsPredicate{})},
	}
}

func hostPredicate(t testing.TB, name string, cfg proto.Message) *routev3.RetryPolicy_RetryHostPredicate {
	return &routev3.RetryPolicy_RetryHostPredicate{Name: name,
		ConfigType: &routev3.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: bootstraptest.MustNew(t, cfg)}}
}

// withRetryPolicy puts policy in place of the /v1/ route's retry policy of envoy.yaml.
func withRetryPolicy(policy *routev3.RetryPolicy) bootstrapEdit {
	return func(b *bootstraptest.Bootstrap) {
		b.Route(func(r *routev3.Route) { r.GetRoute().RetryPolicy = policy })
	}
}

// ep is one endpoint of a test cluster.
type ep struct {
	addr     string
	priority uint32
	health   corev3.HealthStatus
	weight   uint32
}

// endpointsCluster is a STATIC cluster whose endpoints are eps, each in its own
// LocalityLbEndpoints, with metadata naming its address.
func endpointsCluster(name string, eps ...ep) *clusterv3.Cluster {
	c := testCluster(name, "127.0.0.1:1")
	c.LoadAssignment.Endpoints = nil
	for _, e := range eps {
		host, p, _ := net.SplitHostPort(e.addr)
		port, _ := strconv.Atoi(p)
		md, _ := structpb.NewStruct(map[string]any{"channel": e.addr})
		lb := &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
				}}},
			}},
			HealthStatus: e.health,
			Metadata:     &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"gateway": md}},
		}
		if e.weight > 0 {
			lb.LoadBalancingWeight = wrapperspb.UInt32(e.weight)
		}
		c.LoadAssignment.Endpoints = append(c.LoadAssignment.Endpoints, &endpointv3.LocalityLbEndpoints{
			Priority: e.priority, LbEndpoints: []*endpointv3.LbEndpoint{lb},
		})
	}
	return c
}

// refusedAddr is a loopback address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// attemptLog records, in order, which upstream received an attempt and its body.
type attemptLog struct {
	mu     sync.Mutex
	names  []string
	bodies []string
	hdrs   []http.Header
}

func (l *attemptLog) add(name string, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, name)
	l.bodies = append(l.bodies, string(b))
	l.hdrs = append(l.hdrs, r.Header.Clone())
}

func (l *attemptLog) get() ([]string, []string, []http.Header) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.names...), append([]string(nil), l.bodies...), append([]http.Header(nil), l.hdrs...)
}

// answering is an upstream that logs each attempt as name and answers status and body.
func answering(t *testing.T, log *attemptLog, name string, status int, body string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(name, r)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// routingProc is a fake extproc that routes every request to cluster, setting the
// extra headers, and answers every other message with an empty reply.
func routingProc(cluster string, extra ...*corev3.HeaderValueOption) func(s *session) error {
	return watchingProc(func(*extprocsvc.ProcessingRequest) {}, cluster, extra...)
}

// watchingProc is routingProc telling seen about every message.
func watchingProc(seen func(*extprocsvc.ProcessingRequest), cluster string, extra ...*corev3.HeaderValueOption) func(s *session) error {
	return func(s *session) error {
		for m := s.next(); m != nil; m = s.next() {
			seen(m)
			var err error
			switch {
			case m.GetRequestHeaders() != nil:
				err = s.send(routeTo(cluster, extra...))
			case m.GetRequestBody() != nil:
				err = s.send(reqBodyReply(nil))
			case m.GetResponseHeaders() != nil:
				err = s.send(respHeadersReply(nil))
			case m.GetResponseBody() != nil:
				err = s.send(respBodyReply(nil))
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// recordBackoffs makes the front report each retry back-off on a channel.
func recordBackoffs(h *harness) chan time.Duration {
	ch := make(chan time.Duration, 32)
	h.envoy.onBackoff = func(d time.Duration) { ch <- d }
	return ch
}

// TestRetryAcrossPriorities: priority 0 refuses connections, priority 1 answers a
// retriable 503, priority 2 answers: the client gets priority 2's answer, priority 1
// and 2 were each attempted once in that order, each with the whole request body,
// after two jittered back-offs (first in [0,25ms), then [0,50ms)); ext_proc sees only
// the final response.
func TestRetryAcrossPriorities(t *testing.T) {
	log := &attemptLog{}
	cl := endpointsCluster("model",
		ep{addr: refusedAddr(t), priority: 0},
		ep{addr: answering(t, log, "p1", 503, "busy"), priority: 1},
		ep{addr: answering(t, log, "p2", 200, "from p2"), priority: 2},
	)
	statuses := make(chan string, 8)
	h := newHarnessClusters(t, nil, watchingProc(func(m *extprocsvc.ProcessingRequest) {
		if rh := m.GetResponseHeaders(); rh != nil {
			statuses <- headerMap(rh.GetHeaders())[":status"][0]
		}
	}, "model"), withRetryPolicy(failoverRetryPolicy(t)), cl)
	backoffs := recordBackoffs(h)
	body := strings.Repeat("x", 100_000)
	status, _, got := h.do(t, http.MethodPost, "/v1/chat/completions", map[string]string{"Content-Type": "application/json"}, strings.NewReader(body))
	if status != 200 || string(got) != "from p2" {
		t.Fatalf("client got %d %q, want priority 2's answer", status, got)
	}
	names, bodies, _ := log.get()
	if strings.Join(names, ",") != "p1,p2" {
		t.Errorf("attempts %v, want p1 then p2 once each", names)
	}
	for i, b := range bodies {
		if b != body {
			t.Errorf("attempt %d got %d body bytes, want the whole %d", i, len(b), len(body))
		}
	}
	close(backoffs)
	var waits []time.Duration
	for d := range backoffs {
		waits = append(waits, d)
	}
	if len(waits) != 2 || waits[0] >= 25*time.Millisecond || waits[1] >= 50*time.Millisecond || waits[0] < 0 || waits[1] < 0 {
		t.Errorf("back-offs %v, want two, in [0,25ms) then [0,50ms)", waits)
	}
	// The front sends the response headers to ext_proc before the client gets them.
	close(statuses)
	var seen []string
	for st := range statuses {
		seen = append(seen, st)
	}
	if strings.Join(seen, ",") != "200" {
		t.Errorf("ext_proc saw response statuses %v, want only the final 200", seen)
	}
}

// TestMaxRetriesHeader: x-envoy-max-retries set by ext_proc overrides num_retries: 1
// means two attempts, and the second's retriable answer goes downstream as it is; the
// header never reaches the upstream.
func TestMaxRetriesHeader(t *testing.T) {
	log := &attemptLog{}
	cl := endpointsCluster("model",
		ep{addr: refusedAddr(t), priority: 0},
		ep{addr: answering(t, log, "p1", 503, "busy"), priority: 1},
		ep{addr: answering(t, log, "p2", 200, "from p2"), priority: 2},
	)
	h := newHarnessClusters(t, nil, routingProc("model", setHeader("x-envoy-max-retries", "1")), withRetryPolicy(failoverRetryPolicy(t)), cl)
	status, _, got := h.do(t, http.MethodPost, "/v1/chat/completions", nil, strings.NewReader("{}"))
	if status != 503 || string(got) != "busy" {
		t.Fatalf("client got %d %q, want priority 1's 503", status, got)
	}
	names, _, hdrs := log.get()
	if strings.Join(names, ",") != "p1" {
		t.Errorf("attempts reaching an upstream %v, want only p1 (p0 refused, no third)", names)
	}
	if len(hdrs) == 1 && hdrs[0].Get("X-Envoy-Max-Retries") != "" {
		t.Errorf("x-envoy-max-retries reached the upstream")
	}
}

// TestExhaustedConnectFailures: when every attempt fails to connect, the last failure
// is the router's connect-failure local reply, as without retries.
func TestExhaustedConnectFailures(t *testing.T) {
	cl := endpointsCluster("model", ep{addr: refusedAddr(t), priority: 0}, ep{addr: refusedAddr(t), priority: 1})
	h := newHarnessClusters(t, nil, routingProc("model", setHeader("x-envoy-max-retries", "1")), withRetryPolicy(failoverRetryPolicy(t)), cl)
	status, _, got := h.do(t, http.MethodGet, "/v1/models", nil, nil)
	if status != 503 || !strings.Contains(string(got), "service_unavailable") {
		t.Fatalf("client got %d %s, want the connect failure's 503", status, got)
	}
}

// TestUnhealthyPriorityNeverAttempted: an UNHEALTHY endpoint at priority 0 spills all
// the load to priority 1 (no panic: priority 1 is fully available).
func TestUnhealthyPriorityNeverAttempted(t *testing.T) {
	log := &attemptLog{}
	cl := endpointsCluster("model",
		ep{addr: answering(t, log, "p0", 200, "p0"), priority: 0, health: corev3.HealthStatus_UNHEALTHY},
		ep{addr: answering(t, log, "p1", 200, "p1"), priority: 1, health: corev3.HealthStatus_HEALTHY},
	)
	h := newHarnessClusters(t, nil, routingProc("model"), withRetryPolicy(failoverRetryPolicy(t)), cl)
	for range 20 {
		if status, _, got := h.do(t, http.MethodGet, "/v1/models", nil, nil); status != 200 || string(got) != "p1" {
			t.Fatalf("client got %d %q", status, got)
		}
	}
	if names, _, _ := log.get(); strings.Contains(strings.Join(names, ","), "p0") {
		t.Errorf("the unhealthy endpoint was attempted: %v", names)
	}
}

// TestNoRetryAfterResponseHeaders: an upstream that resets in the middle of a streamed
// body is not retried (the headers went downstream); the client sees a broken stream.
func TestNoRetryAfterResponseHeaders(t *testing.T) {
	log := &attemptLog{}
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add("p0", r)
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(broken.Close)
	cl := endpointsCluster("model",
		ep{addr: broken.Listener.Addr().String(), priority: 0},
		ep{addr: answering(t, log, "p1", 200, "p1"), priority: 1},
	)
	h := newHarnessClusters(t, nil, routingProc("model"), withRetryPolicy(failoverRetryPolicy(t)), cl)
	resp, err := http.Get(h.front.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || err == nil {
		t.Errorf("client got %d %q (read error %v), want a 200 whose body breaks", resp.StatusCode, b, err)
	}
	if names, _, _ := log.get(); strings.Join(names, ",") != "p0" {
		t.Errorf("attempts %v, want only p0", names)
	}
}

// TestPreviousHostsAvoidsRepeats: within one priority whose weights favour one host,
// previous_hosts (with host_selection_retry_max_attempts) sends the retry to the other
// host, request after request.
func TestPreviousHostsAvoidsRepeats(t *testing.T) {
	log := &attemptLog{}
	cl := endpointsCluster("model",
		ep{addr: answering(t, log, "a", 503, "a"), priority: 0, weight: 5},
		ep{addr: answering(t, log, "b", 503, "b"), priority: 0, weight: 1},
	)
	h := newHarnessClusters(t, nil, routingProc("model", setHeader("x-envoy-max-retries", "1")), withRetryPolicy(failoverRetryPolicy(t)), cl)
	for i := range 6 {
		if status, _, _ := h.do(t, http.MethodGet, "/v1/models", nil, nil); status != 503 {
			t.Fatalf("request %d: status %d", i, status)
		}
		names, _, _ := log.get()
		if len(names) != 2*(i+1) || names[2*i] == names[2*i+1] {
			t.Fatalf("request %d: attempts %v, want two to different hosts", i, names)
		}
	}
}

// TestRetryRefusals: settings and headers the front does not emulate are refused,
// naming them.
func TestRetryRefusals(t *testing.T) {
	for name, c := range map[string]struct {
		policy *routev3.RetryPolicy
		want   string
	}{
		"gateway-error":  {&routev3.RetryPolicy{RetryOn: "connect-failure,gateway-error"}, `"gateway-error" not emulated`},
		"retry_back_off": {&routev3.RetryPolicy{RetryOn: "reset", RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Second)}}, "retry_back_off"},
		"other priority": {&routev3.RetryPolicy{RetryOn: "reset", RetryHostPredicate: []*routev3.RetryPolicy_RetryHostPredicate{hostPredicate(t,
			"envoy.retry_host_predicates.omit_canary_hosts", &omitcanaryv3.OmitCanaryHostsPredicate{})}}, "omit_canary_hosts"},
	} {
		b := loadBootstrap(t)
		withRetryPolicy(c.policy)(b)
		if _, err := FromBootstrap(b.Parsed()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", name, err, c.want)
		}
	}
	b := loadBootstrap(t)
	b.VirtualHost(func(vh *routev3.VirtualHost) { vh.IncludeRequestAttemptCount = true })
	if _, err := FromBootstrap(b.Parsed()); err == nil || !strings.Contains(err.Error(), "include_request_attempt_count") {
		t.Errorf("include_request_attempt_count: error %v", err)
	}
}

// TestDegradedEndpointNacked: a cluster with a DEGRADED endpoint is refused over CDS.
func TestDegradedEndpointNacked(t *testing.T) {
	h := newHarness(t, nil, routingProc("model"), nil)
	h.cds.set(t, testCluster("mock-providers", h.upstream.Listener.Addr().String()),
		endpointsCluster("model", ep{addr: "127.0.0.1:1", health: corev3.HealthStatus_DEGRADED}))
	select {
	case msg := <-h.cds.nacks:
		if !strings.Contains(msg, "model") || !strings.Contains(msg, "DEGRADED") {
			t.Errorf("NACK %q, want the cluster and DEGRADED named", msg)
		}
	case <-time.After(testkit.Deadline):
		t.Fatal("no NACK")
	}
}

// TestUnemulatedRetryHeaderRefused: a retry header the front does not emulate, set by
// ext_proc, fails the request with the front's refusal details rather than being
// silently dropped.
func TestUnemulatedRetryHeaderRefused(t *testing.T) {
	log := &attemptLog{}
	cl := endpointsCluster("model", ep{addr: answering(t, log, "p0", 200, "p0")})
	h := newHarnessClusters(t, nil, routingProc("model", setHeader("x-envoy-retry-on", "5xx")), withRetryPolicy(failoverRetryPolicy(t)), cl)
	if status, _, _ := h.do(t, http.MethodGet, "/v1/models", nil, nil); status != 500 {
		t.Errorf("status %d, want 500", status)
	}
	if names, _, _ := log.get(); len(names) != 0 {
		t.Errorf("attempts %v, want none", names)
	}
}
