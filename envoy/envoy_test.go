// Package envoy_test checks envoy.yaml: it parses into Envoy's own v3 protos (strictly,
// with every typed_config resolved and validated) and its wiring is what extproc and the
// rest of the gateway expect.
package envoy_test

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	celv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/llmgw/gateway/envoy/config"
	extprocenvoy "github.com/llmgw/gateway/extproc/envoy"
	"github.com/llmgw/gateway/extproc/lifecycle"
)

// fourMiB is the listener's buffer limit: twice the API's 2 MiB limit on the client's
// bytes (which extproc enforces), headroom for the body extproc rewrites.
const fourMiB = 4 * 1024 * 1024

func load(t *testing.T) (*bootstrapv3.Bootstrap, *hcmv3.HttpConnectionManager) {
	t.Helper()
	bs, err := config.Load("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ls := bs.GetStaticResources().GetListeners()
	if len(ls) != 1 {
		t.Fatalf("%d listeners, want 1", len(ls))
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := ls[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	return bs, hcm
}

func clusters(bs *bootstrapv3.Bootstrap) map[string]*clusterv3.Cluster {
	m := map[string]*clusterv3.Cluster{}
	for _, c := range bs.GetStaticResources().GetClusters() {
		m[c.GetName()] = c
	}
	return m
}

func extProc(t *testing.T, hcm *hcmv3.HttpConnectionManager) *extprocv3.ExternalProcessor {
	t.Helper()
	fs := hcm.GetHttpFilters()
	if len(fs) != 2 {
		t.Fatalf("%d http filters, want ext_proc and router", len(fs))
	}
	ep := &extprocv3.ExternalProcessor{}
	if err := fs[0].GetTypedConfig().UnmarshalTo(ep); err != nil {
		t.Fatalf("first filter is not ext_proc: %v", err)
	}
	if !fs[1].GetTypedConfig().MessageIs(&routerv3.Router{}) {
		t.Fatalf("last filter is not the router")
	}
	return ep
}

func TestListenerAndLimits(t *testing.T) {
	bs, hcm := load(t)
	l := bs.GetStaticResources().GetListeners()[0]
	sa := l.GetAddress().GetSocketAddress()
	if sa.GetAddress() != "127.0.0.1" || sa.GetPortValue() != 8080 {
		t.Errorf("listener on %s:%d", sa.GetAddress(), sa.GetPortValue())
	}
	if a := bs.GetAdmin().GetAddress().GetSocketAddress(); a.GetAddress() != "127.0.0.1" || a.GetPortValue() != 9901 {
		t.Errorf("admin on %s:%d", a.GetAddress(), a.GetPortValue())
	}
	if got := l.GetPerConnectionBufferLimitBytes().GetValue(); got != fourMiB {
		t.Errorf("per_connection_buffer_limit_bytes = %d, want %d", got, fourMiB)
	}
	// No route-level limit may override the listener's (it would take the rewrite's
	// headroom, or let bodies over it reach extproc).
	for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
		//lint:ignore SA1019 a deprecated limit still overrides the listener's in Envoy 1.37.
		if vh.GetPerRequestBufferLimitBytes() != nil || vh.GetRequestBodyBufferLimit() != nil {
			t.Errorf("virtual host %s overrides the buffer limit", vh.GetName())
		}
		for _, r := range vh.GetRoutes() {
			//lint:ignore SA1019 a deprecated limit still overrides the listener's in Envoy 1.37.
			if r.GetPerRequestBufferLimitBytes() != nil || r.GetRequestBodyBufferLimit() != nil {
				t.Errorf("route %v overrides the buffer limit", r.GetMatch())
			}
		}
	}
	if hcm.GetCodecType() != hcmv3.HttpConnectionManager_AUTO {
		t.Errorf("codec_type = %v, want AUTO (HTTP/1.1 and h2c)", hcm.GetCodecType())
	}
	if d := hcm.GetStreamIdleTimeout().AsDuration(); d < 5*time.Minute {
		t.Errorf("stream_idle_timeout = %v, want >= 300s", d)
	}
	// request_timeout bounds receiving the request (a slow client holds an ext_proc
	// stream and a circuit-breaker slot while its body trickles in), never the answer.
	if d := hcm.GetRequestTimeout().AsDuration(); d <= 0 || d > 2*time.Minute {
		t.Errorf("request_timeout = %v, want a bound on receiving the request (60s)", d)
	}
}

func TestExtProcWiring(t *testing.T) {
	bs, hcm := load(t)
	ep := extProc(t, hcm)
	cs := clusters(bs)
	name := ep.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	c := cs[name]
	if name != "extproc" || c == nil {
		t.Fatalf("ext_proc cluster %q not defined", name)
	}
	// extproc speaks gRPC: the cluster must be HTTP/2.
	opts := &httpv3.HttpProtocolOptions{}
	a := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	if a == nil || a.UnmarshalTo(opts) != nil || opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("extproc cluster is not HTTP/2")
	}
	pm := ep.GetProcessingMode()
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"request_header_mode", pm.GetRequestHeaderMode(), extprocv3.ProcessingMode_SEND},
		{"request_body_mode", pm.GetRequestBodyMode(), extprocv3.ProcessingMode_BUFFERED},
		{"request_trailer_mode", pm.GetRequestTrailerMode(), extprocv3.ProcessingMode_SKIP},
		{"response_header_mode", pm.GetResponseHeaderMode(), extprocv3.ProcessingMode_SEND},
		{"response_body_mode", pm.GetResponseBodyMode(), extprocv3.ProcessingMode_NONE},
		{"response_trailer_mode", pm.GetResponseTrailerMode(), extprocv3.ProcessingMode_SKIP},
		{"allow_mode_override", ep.GetAllowModeOverride(), true},
		{"failure_mode_allow", ep.GetFailureModeAllow(), false},
		{"allowed_override_modes empty", len(ep.GetAllowedOverrideModes()), 0},
		{"no request attributes", len(ep.GetRequestAttributes()), 0},
		{"disable_clear_route_cache", ep.GetDisableClearRouteCache(), false},
		{"route_cache_action", ep.GetRouteCacheAction(), extprocv3.ExternalProcessor_DEFAULT},
		{"immediate responses enabled", ep.GetDisableImmediateResponse(), false},
		{"observability_mode", ep.GetObservabilityMode(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	mt := ep.GetMessageTimeout().AsDuration()
	if mt < time.Second || mt > 5*time.Second {
		t.Errorf("message_timeout = %v, want a database round trip's worth (1–5 s)", mt)
	}
	if ep.GetMaxMessageTimeout() != nil && ep.GetMaxMessageTimeout().AsDuration() < mt {
		t.Errorf("max_message_timeout %v below message_timeout %v", ep.GetMaxMessageTimeout().AsDuration(), mt)
	}
}

func TestRouting(t *testing.T) {
	bs, hcm := load(t)
	cs := clusters(bs)
	vhs := hcm.GetRouteConfig().GetVirtualHosts()
	if len(vhs) != 1 {
		t.Fatalf("%d virtual hosts", len(vhs))
	}
	var all *routev3.Route
	for _, r := range vhs[0].GetRoutes() {
		if ra := r.GetRoute(); ra != nil && ra.GetCluster() != "" && cs[ra.GetCluster()] == nil {
			t.Errorf("route %v names undefined cluster %q", r.GetMatch(), ra.GetCluster())
		}
		if r.GetMatch().GetPrefix() == "/" {
			all = r
		}
	}
	// Every path: extproc rewrites :path to the channel's own (Gemini's /v1beta/...,
	// Bedrock's /model/...) and Envoy routes the rewritten request again.
	if all == nil {
		t.Fatal("no route for every path (prefix /)")
	}
	ra := all.GetRoute()
	if ra.GetClusterHeader() != "x-gateway-upstream" {
		t.Errorf("cluster_header = %q", ra.GetClusterHeader())
	}
	if ra.GetTimeout() == nil || ra.GetTimeout().AsDuration() != 0 {
		t.Errorf("route timeout = %v, want 0s", ra.GetTimeout())
	}
	// Retries only where extproc asks for them (x-envoy-max-retries on a failover
	// request), across priorities, never to the same host, on the failover conditions.
	rp := ra.GetRetryPolicy()
	if rp.GetNumRetries().GetValue() != 0 || rp.GetRetryOn() != "connect-failure,reset,retriable-status-codes" ||
		len(rp.GetRetriableStatusCodes()) != 1 || rp.GetRetriableStatusCodes()[0] != 503 ||
		rp.GetRetryPriority().GetName() != "envoy.retry_priorities.previous_priorities" || len(rp.GetRetryHostPredicate()) != 1 {
		t.Errorf("retry_policy = %v", rp)
	}
	if d := ra.GetIdleTimeout().AsDuration(); d < 5*time.Minute {
		t.Errorf("route idle_timeout = %v, want >= 300s", d)
	}
	for _, want := range []string{"extproc"} {
		if cs[want] == nil {
			t.Errorf("cluster %q missing", want)
		}
	}
}

// TestClustersComeOverADS: the only static cluster is extproc's; the channels' clusters
// come from extproc's xDS server over ADS on it (their TLS settings are checked where
// they are built, extproc/xds).
func TestClustersComeOverADS(t *testing.T) {
	bs, _ := load(t)
	if n := len(bs.GetStaticResources().GetClusters()); n != 1 {
		t.Errorf("%d static clusters, want only extproc", n)
	}
	dr := bs.GetDynamicResources()
	ads := dr.GetAdsConfig()
	if ads.GetApiType() != corev3.ApiConfigSource_GRPC || len(ads.GetGrpcServices()) != 1 ||
		ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName() != "extproc" {
		t.Errorf("ads_config = %v", ads)
	}
	if dr.GetCdsConfig().GetAds() == nil {
		t.Error("cds_config does not use ADS")
	}
	if bs.GetNode().GetId() == "" || bs.GetNode().GetCluster() == "" {
		t.Error("ADS needs node.id and node.cluster")
	}
}

func TestLocalReplyMappers(t *testing.T) {
	_, hcm := load(t)
	lr := hcm.GetLocalReplyConfig()
	if lr.GetBodyFormat() != nil {
		t.Error("a top-level body_format would rewrite extproc's own replies")
	}
	codes := map[string]bool{}
	for i, m := range lr.GetMappers() {
		cel := &celv3.ExpressionFilter{}
		if err := m.GetFilter().GetExtensionFilter().GetTypedConfig().UnmarshalTo(cel); err != nil {
			t.Fatalf("mapper %d: %v", i, err)
		}
		expr := cel.GetExpression()
		// A mapper that could match extproc's own replies must exclude them.
		if !strings.Contains(expr, "response.code_details ==") && !strings.Contains(expr, "!response.code_details.startsWith('extproc_')") &&
			!strings.Contains(expr, "response.code_details.startsWith('upstream_')") {
			t.Errorf("mapper %d (%s) may rewrite extproc's replies", i, expr)
		}
		js := m.GetBodyFormatOverride().GetJsonFormat().AsMap()
		anth := strings.Contains(expr, "/v1/messages")
		var code string
		if anth {
			e, _ := js["error"].(map[string]any)
			if js["type"] != "error" || e["type"] == nil || e["message"] == nil {
				t.Errorf("mapper %d: not the Anthropic envelope: %v", i, js)
			}
			code, _ = e["code"].(string)
		} else {
			e, _ := js["error"].(map[string]any)
			for _, f := range []string{"message", "type", "code", "retryable", "doc_url"} {
				if _, ok := e[f]; !ok {
					t.Errorf("mapper %d: OpenAI envelope lacks %s", i, f)
				}
			}
			// No field is at fault in Envoy's own errors: param (a string when present)
			// is omitted, never null.
			if p, ok := e["param"]; ok {
				t.Errorf("mapper %d: param = %v, want it omitted", i, p)
			}
			code, _ = e["code"].(string)
		}
		codes[code] = true
		if len(m.GetHeadersToAdd()) == 0 || m.GetHeadersToAdd()[0].GetHeader().GetKey() != "x-should-retry" {
			t.Errorf("mapper %d: no x-should-retry", i)
		}
	}
	for _, c := range []string{"request_body_too_large", "service_unavailable", "upstream_error", "internal_error"} {
		if !codes[c] {
			t.Errorf("no mapper answers %s", c)
		}
	}
}

func TestLoadRejectsUnknownFields(t *testing.T) {
	tests := []struct {
		name, yaml string
	}{
		{name: "unknown field", yaml: "static_resources: {clusterz: []}"},
		{name: "unresolvable typed_config", yaml: `
static_resources:
  clusters:
  - name: x
    transport_socket:
      name: t
      typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.nope.v3.Nope}`},
		{name: "invalid typed_config contents", yaml: `
static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 1}}
    filter_chains:
    - filters:
      - name: hcm
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := config.Parse([]byte(tt.yaml)); err == nil {
				t.Error("accepted")
			}
		})
	}
}

// TestClientRequestsAreExternal checks the settings that keep a client from steering
// Envoy with x-envoy-* headers (retries and timeouts the router would act on after
// extproc): every request is external, so Envoy strips them, and extproc may remove
// the rest.
func TestClientRequestsAreExternal(t *testing.T) {
	_, hcm := load(t)
	if !hcm.GetUseRemoteAddress().GetValue() {
		t.Error("use_remote_address is not true: a client-sent x-forwarded-for would decide internal status")
	}
	if n := hcm.GetXffNumTrustedHops(); n != 0 {
		t.Errorf("xff_num_trusted_hops = %d: the local front has no proxy in front of it", n)
	}
	if hcm.GetSkipXffAppend() {
		t.Error("skip_xff_append set")
	}
	if len(hcm.GetOriginalIpDetectionExtensions()) != 0 {
		t.Error("original_ip_detection_extensions would replace use_remote_address")
	}
	iac := hcm.GetInternalAddressConfig()
	if iac == nil || len(iac.GetCidrRanges()) == 0 {
		t.Fatal("internal_address_config needs an explicit, non-empty cidr_ranges (an empty one falls back to RFC 1918)")
	}
	if iac.GetUnixSockets() {
		t.Error("internal_address_config.unix_sockets set")
	}
	// No peer a client can connect from may be internal.
	for _, peer := range []string{"127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "100.64.0.1", "::1", "fd00::1", "fe80::1", "8.8.8.8", "2001:4860::1"} {
		ip := netip.MustParseAddr(peer)
		for _, r := range iac.GetCidrRanges() {
			a, err := netip.ParseAddr(r.GetAddressPrefix())
			if err != nil {
				t.Fatalf("cidr %v: %v", r, err)
			}
			if p := netip.PrefixFrom(a, int(r.GetPrefixLen().GetValue())); p.Contains(ip) {
				t.Errorf("peer %s is internal (%s)", peer, p)
			}
		}
	}

	mr := extProc(t, hcm).GetMutationRules()
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"allow_envoy (extproc removes client x-envoy-*)", mr.GetAllowEnvoy().GetValue(), true},
		{"allow_all_routing", mr.GetAllowAllRouting().GetValue(), false},
		{"disallow_all", mr.GetDisallowAll().GetValue(), false},
		{"disallow_system (:path, :status)", mr.GetDisallowSystem().GetValue(), false},
		{"no allow_expression", mr.GetAllowExpression() == nil, true},
		{"no disallow_expression", mr.GetDisallowExpression() == nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

// TestMessageTimeoutMatchesTheBudget: extproc's time budget (extproc/lifecycle/budget.go)
// is built on this file's message timeout; were they to differ, an admission could
// outlast Envoy's timer and the client would get Envoy's 504 instead of our answer.
func TestMessageTimeoutMatchesTheBudget(t *testing.T) {
	_, hcm := load(t)
	ep := extProc(t, hcm)
	if got := ep.GetMessageTimeout().AsDuration(); got != lifecycle.EnvoyMessageTimeout {
		t.Errorf("message_timeout %v, extproc's budget assumes %v", got, lifecycle.EnvoyMessageTimeout)
	}
	if lifecycle.AdmitBudget >= ep.GetMessageTimeout().AsDuration() {
		t.Errorf("admission budget %v does not fit in the message timeout", lifecycle.AdmitBudget)
	}
}

// TestAccessLogReadsExtprocFacts: the access log is one JSON line on stdout whose
// gateway fields read the namespace and keys extproc's replies set, and the ext_proc
// filter accepts that namespace (without it Envoy drops the metadata: ext_proc.cc,
// Filter::setDynamicMetadata). No field reads a credential.
func TestAccessLogReadsExtprocFacts(t *testing.T) {
	_, hcm := load(t)
	ep := extProc(t, hcm)
	if got := ep.GetMetadataOptions().GetReceivingNamespaces().GetUntyped(); !slices.Contains(got, extprocenvoy.MetadataNamespace) {
		t.Errorf("metadata_options.receiving_namespaces.untyped = %v, want %q", got, extprocenvoy.MetadataNamespace)
	}
	als := hcm.GetAccessLog()
	if len(als) != 1 {
		t.Fatalf("%d access logs, want 1", len(als))
	}
	std := &streamv3.StdoutAccessLog{}
	if err := als[0].GetTypedConfig().UnmarshalTo(std); err != nil {
		t.Fatalf("access log is not the stdout logger: %v", err)
	}
	jf := std.GetLogFormat().GetJsonFormat()
	if jf == nil {
		t.Fatal("access log format is not json_format")
	}
	op := regexp.MustCompile(`%DYNAMIC_METADATA\(([^:)]*):([^)]*)\)%`)
	seen := map[string]bool{}
	for field, v := range jf.AsMap() {
		s, _ := v.(string)
		if low := strings.ToLower(s); strings.Contains(low, "authorization") || strings.Contains(low, "api-key") {
			t.Errorf("field %s reads a credential: %s", field, s)
		}
		for _, m := range op.FindAllStringSubmatch(s, -1) {
			if m[1] != extprocenvoy.MetadataNamespace || !slices.Contains(extprocenvoy.MetadataKeys, m[2]) {
				t.Errorf("field %s reads %s:%s, which extproc never sets", field, m[1], m[2])
			}
			seen[m[2]] = true
		}
	}
	for _, k := range extprocenvoy.MetadataKeys {
		if !seen[k] {
			t.Errorf("the access log does not carry extproc's %q", k)
		}
	}
}

// TestBufferLimitMatchesExtProc: extproc asks for a BUFFERED response body only when it
// is well below the listener's buffer limit (lifecycle.EnvoyBufferLimit); were this
// file's limit lower, a body extproc buffers could get Envoy's own 500
// (response_payload_too_large) after the provider billed it.
func TestBufferLimitMatchesExtProc(t *testing.T) {
	bs, _ := load(t)
	l := bs.GetStaticResources().GetListeners()[0]
	if got := l.GetPerConnectionBufferLimitBytes().GetValue(); int64(got) != lifecycle.EnvoyBufferLimit {
		t.Errorf("per_connection_buffer_limit_bytes %d, extproc assumes %d", got, lifecycle.EnvoyBufferLimit)
	}
}

// TestOverloadManager: a flood of connections or a growing heap never takes Envoy down:
// a connection limit, and requests refused before the heap reaches the container's memory
// limit (deploy/base/gateway/deployment.yaml: 1 GiB).
func TestOverloadManager(t *testing.T) {
	bs, _ := load(t)
	om := bs.GetOverloadManager()
	monitors := map[string]bool{}
	for _, m := range om.GetResourceMonitors() {
		monitors[m.GetName()] = true
	}
	for _, want := range []string{"envoy.resource_monitors.global_downstream_max_connections", "envoy.resource_monitors.fixed_heap"} {
		if !monitors[want] {
			t.Errorf("overload_manager lacks the %s monitor", want)
		}
	}
	stop := 0.0
	for _, a := range om.GetActions() {
		if a.GetName() == "envoy.overload_actions.stop_accepting_requests" {
			stop = a.GetTriggers()[0].GetThreshold().GetValue()
		}
	}
	if stop <= 0 || stop >= 1 {
		t.Errorf("stop_accepting_requests threshold %v, want one below 1", stop)
	}
}
