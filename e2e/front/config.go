package front

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Config is the subset of an Envoy bootstrap that the front emulates, extracted and
// checked by FromBootstrap.
type Config struct {
	// Listen is the listener's address (host:port).
	Listen string
	// Admin is the admin interface's address (host:port; "" when none). The front serves
	// no admin endpoint of Envoy's; only Go's runtime profiles when asked (main.go).
	Admin string
	// BufferLimit is the request (and buffered response) body limit in bytes; a body of
	// exactly this size is accepted.
	BufferLimit int64
	// StreamIdleTimeout is the HCM stream idle timeout (0: none).
	StreamIdleTimeout time.Duration
	// MaxConcurrentStreams is the HCM http2_protocol_options.max_concurrent_streams: the
	// SETTINGS_MAX_CONCURRENT_STREAMS a downstream HTTP/2 connection is offered (Envoy's
	// default 2147483647).
	MaxConcurrentStreams uint32
	// RequestTimeout is the HCM request_timeout (0: none): the whole request must be
	// received within it, counted from its start; a response does not restart it.
	RequestTimeout time.Duration
	// UseRemoteAddress, XffNumTrustedHops and InternalRanges are how the connection
	// manager finds the client address and decides whether a request is internal
	// (keeps x-envoy-* instructions) or external (cleaned of them).
	UseRemoteAddress  bool
	XffNumTrustedHops int
	// InternalRanges are internal_address_config.cidr_ranges; none: no address is
	// internal (Envoy's default since explicit_internal_address_config).
	InternalRanges []netip.Prefix
	// AlwaysSetRequestID is always_set_request_id_in_response: every response, local
	// replies and ext_proc immediate responses included, carries the request's
	// x-request-id.
	AlwaysSetRequestID bool
	Routes             []Route
	ExtProc            ExtProc
	Clusters           map[string]*Cluster
	LocalReply         []Mapper
	// AccessLog is the connection manager's access log (nil: none).
	AccessLog *AccessLog
	// Overload is the bootstrap's overload manager (zero: none).
	Overload Overload
	// ADS is where the clusters of dynamic_resources come from (nil: static only).
	ADS *ADS
}

// Route is one route of the single virtual host.
type Route struct {
	Prefix string
	// Exactly one of Cluster and ClusterHeader is set.
	Cluster, ClusterHeader string
	ClusterNotFoundStatus  int
	AutoHostRewrite        bool
	// IdleTimeout overrides the stream idle timeout for this route (0: unset).
	IdleTimeout time.Duration
	// RequestHeadersToRemove are removed from the request the router sends upstream,
	// after the route (and its cluster_header) was chosen.
	RequestHeadersToRemove []string
	// Retry is the route's retry_policy (nil: none).
	Retry *RetryPolicy
}

// ExtProc is the ext_proc filter's configuration.
type ExtProc struct {
	Cluster           string
	Mode              Mode
	AllowModeOverride bool
	MessageTimeout    time.Duration
	MaxMessageTimeout time.Duration
	// AllowEnvoy and AllowAllRouting are the filter's mutation_rules: x-envoy-* headers,
	// and :authority/host/:method/:scheme, may be mutated by extproc.
	AllowEnvoy, AllowAllRouting bool
	// ReceivingNamespaces are metadata_options.receiving_namespaces.untyped: the
	// dynamic metadata namespaces a reply may set.
	ReceivingNamespaces []string
}

// Mode is an ext_proc processing mode: header modes SEND/SKIP, body modes NONE,
// STREAMED or BUFFERED (the values of extprocv3.ProcessingMode).
type Mode struct {
	RequestHeader  extprocv3.ProcessingMode_HeaderSendMode
	RequestBody    extprocv3.ProcessingMode_BodySendMode
	ResponseHeader extprocv3.ProcessingMode_HeaderSendMode
	ResponseBody   extprocv3.ProcessingMode_BodySendMode
}

// Cluster is one upstream cluster with its endpoints.
type Cluster struct {
	Name string
	// Addr is host:port of the first endpoint (the only one of a gRPC or DNS cluster).
	Addr string
	// Host is the first endpoint's host name, used by auto_host_rewrite for DNS clusters.
	Host string
	// Endpoints are the cluster's hosts, with their priorities and health.
	Endpoints []*Host
	DNS       bool
	HTTP2     bool
	// TLS is the client TLS configuration of a cluster with an UpstreamTlsContext.
	TLS *tls.Config
	// SocketMatches are the transport_socket_matches, in order (socketmatch.go).
	SocketMatches []SocketMatch
	// MaxInFlight is how many requests (HTTP/2: streams) the cluster's default-priority
	// circuit breakers let be in flight at once: max_requests, and for HTTP/1 also no
	// more than max_connections + max_pending_requests (each request holds a connection
	// or waits in the pending queue). Envoy's defaults are 1024 each.
	MaxInFlight int
	// MaxRetries is the circuit breakers' max_retries: how many retries of the cluster's
	// requests may be outstanding at once (Envoy's default 3).
	MaxRetries int
	// KeepaliveInterval and KeepaliveTimeout are the HTTP/2 connection_keepalive PING
	// settings (0: no keepalive).
	KeepaliveInterval, KeepaliveTimeout time.Duration
	// Attempt is the upstream ext_proc of the cluster's http_filters (nil: no upstream
	// filters), run once per attempt of the router.
	Attempt *AttemptExtProc
	// source is the cluster's configuration, serialized deterministically: CDS keeps a
	// cluster whose source did not change.
	source string
}

// defaultCircuitBreaker is Envoy's default for max_connections, max_pending_requests and
// max_requests.
const defaultCircuitBreaker = 1024

// defaultMaxRetries is Envoy's default for the circuit breakers' max_retries.
const defaultMaxRetries = 3

const defaultBufferLimit = 1 << 20 // Envoy's per_connection_buffer_limit_bytes default

// allowed lists, per message type, the fields the front emulates (or that have no
// observable effect on what the front does, such as names and stat prefixes). Any other
// field set in the configuration makes FromBootstrap fail, naming it.
var allowed = map[protoreflect.FullName][]protoreflect.Name{
	"envoy.config.bootstrap.v3.Bootstrap":                                                                     {"admin", "static_resources", "overload_manager", "node", "dynamic_resources"},
	"envoy.config.core.v3.Node":                                                                               {"id", "cluster"},
	"envoy.config.bootstrap.v3.Bootstrap.DynamicResources":                                                    {"ads_config", "cds_config"},
	"envoy.config.core.v3.ApiConfigSource":                                                                    {"api_type", "transport_api_version", "grpc_services", "set_node_on_first_message_only"},
	"envoy.config.core.v3.ConfigSource":                                                                       {"ads", "resource_api_version", "initial_fetch_timeout"},
	"envoy.config.core.v3.AggregatedConfigSource":                                                             {},
	"envoy.config.overload.v3.OverloadManager":                                                                {"refresh_interval", "resource_monitors", "actions"},
	"envoy.config.overload.v3.ResourceMonitor":                                                                {"name", "typed_config"},
	"envoy.config.overload.v3.OverloadAction":                                                                 {"name", "triggers"},
	"envoy.config.overload.v3.Trigger":                                                                        {"name", "threshold"},
	"envoy.config.overload.v3.ThresholdTrigger":                                                               {"value"},
	"envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig":                {"max_active_downstream_connections"},
	"envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig":                                        {"max_heap_size_bytes"},
	"envoy.config.bootstrap.v3.Bootstrap.StaticResources":                                                     {"listeners", "clusters"},
	"envoy.config.bootstrap.v3.Admin":                                                                         {"address"},
	"envoy.config.core.v3.Address":                                                                            {"socket_address"},
	"envoy.config.core.v3.SocketAddress":                                                                      {"address", "port_value"},
	"envoy.config.listener.v3.Listener":                                                                       {"name", "address", "per_connection_buffer_limit_bytes", "filter_chains"},
	"envoy.config.listener.v3.FilterChain":                                                                    {"filters"},
	"envoy.config.listener.v3.Filter":                                                                         {"name", "typed_config"},
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager":                       {"stat_prefix", "codec_type", "stream_idle_timeout", "request_timeout", "route_config", "http_filters", "local_reply_config", "use_remote_address", "xff_num_trusted_hops", "internal_address_config", "always_set_request_id_in_response", "http2_protocol_options", "access_log"},
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.InternalAddressConfig": {"cidr_ranges"},
	"envoy.config.core.v3.CidrRange":                                                                          {"address_prefix", "prefix_len"},
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter":                                  {"name", "typed_config"},
	"envoy.extensions.filters.network.http_connection_manager.v3.LocalReplyConfig":                            {"mappers"},
	"envoy.extensions.filters.network.http_connection_manager.v3.ResponseMapper":                              {"filter", "status_code", "headers_to_add", "body", "body_format_override"},
	"envoy.config.route.v3.RouteConfiguration":                                                                {"name", "virtual_hosts"},
	"envoy.config.route.v3.VirtualHost":                                                                       {"name", "domains", "routes"},
	"envoy.config.route.v3.Route":                                                                             {"name", "match", "route", "request_headers_to_remove"},
	"envoy.config.route.v3.RouteMatch":                                                                        {"prefix"},
	"envoy.config.route.v3.RouteAction":                                                                       {"cluster", "cluster_header", "cluster_not_found_response_code", "auto_host_rewrite", "timeout", "idle_timeout", "retry_policy"},
	"envoy.config.route.v3.RetryPolicy":                                                                       {"retry_on", "num_retries", "retriable_status_codes", "retry_priority", "retry_host_predicate", "host_selection_retry_max_attempts"},
	"envoy.config.route.v3.RetryPolicy.RetryPriority":                                                         {"name", "typed_config"},
	"envoy.config.route.v3.RetryPolicy.RetryHostPredicate":                                                    {"name", "typed_config"},
	"envoy.extensions.retry.priority.previous_priorities.v3.PreviousPrioritiesConfig":                         {"update_frequency"},
	"envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate":                                    {},
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor":                                             {"grpc_service", "failure_mode_allow", "processing_mode", "message_timeout", "max_message_timeout", "allow_mode_override", "stat_prefix", "mutation_rules", "metadata_options", "request_attributes"},
	"envoy.extensions.filters.http.ext_proc.v3.MetadataOptions":                                               {"receiving_namespaces"},
	"envoy.extensions.filters.http.ext_proc.v3.MetadataOptions.MetadataNamespaces":                            {"untyped"},
	"envoy.config.accesslog.v3.AccessLog":                                                                     {"name", "typed_config"},
	"envoy.extensions.access_loggers.stream.v3.StdoutAccessLog":                                               {"log_format"},
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules":                                               {"allow_all_routing", "allow_envoy"},
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode":                                                {"request_header_mode", "response_header_mode", "request_body_mode", "response_body_mode", "request_trailer_mode", "response_trailer_mode"},
	"envoy.config.core.v3.GrpcService":                                                                        {"envoy_grpc", "initial_metadata"},
	"envoy.config.core.v3.GrpcService.EnvoyGrpc":                                                              {"cluster_name"},
	"envoy.extensions.filters.http.router.v3.Router":                                                          {},
	"envoy.config.accesslog.v3.AccessLogFilter":                                                               {"extension_filter"},
	"envoy.config.accesslog.v3.ExtensionFilter":                                                               {"name", "typed_config"},
	"envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter":                                         {"expression"},
	"envoy.config.core.v3.HeaderValueOption":                                                                  {"header", "append_action"},
	"envoy.config.core.v3.HeaderValue":                                                                        {"key", "value"},
	"envoy.config.core.v3.SubstitutionFormatString":                                                           {"json_format"},
	"envoy.config.core.v3.DataSource":                                                                         {"inline_string", "filename"},
	"envoy.config.cluster.v3.Cluster":                                                                         {"name", "type", "connect_timeout", "load_assignment", "typed_extension_protocol_options", "transport_socket", "dns_lookup_family", "circuit_breakers", "transport_socket_matches"},
	"envoy.config.cluster.v3.Cluster.TransportSocketMatch":                                                    {"name", "match", "transport_socket"},
	"envoy.config.cluster.v3.CircuitBreakers":                                                                 {"thresholds"},
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds":                                                      {"max_connections", "max_pending_requests", "max_requests", "max_retries"},
	"envoy.config.endpoint.v3.ClusterLoadAssignment":                                                          {"cluster_name", "endpoints"},
	"envoy.config.endpoint.v3.LocalityLbEndpoints":                                                            {"lb_endpoints", "priority"},
	"envoy.config.endpoint.v3.LbEndpoint":                                                                     {"endpoint", "health_status", "load_balancing_weight", "metadata"},
	"envoy.config.core.v3.Metadata":                                                                           {"filter_metadata"},
	"envoy.config.endpoint.v3.Endpoint":                                                                       {"address"},
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions":                                                  {"explicit_http_config", "http_filters"},
	"envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec":                                           {},
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.ExplicitHttpConfig":                               {"http_protocol_options", "http2_protocol_options"},
	"envoy.config.core.v3.Http1ProtocolOptions":                                                               {},
	"envoy.config.core.v3.Http2ProtocolOptions":                                                               {"connection_keepalive", "max_concurrent_streams"},
	"envoy.config.core.v3.KeepaliveSettings":                                                                  {"interval", "timeout"},
	"envoy.config.core.v3.TransportSocket":                                                                    {"name", "typed_config"},
	"envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext":                                            {"sni", "common_tls_context"},
	"envoy.extensions.transport_sockets.tls.v3.CommonTlsContext":                                              {"validation_context"},
	"envoy.extensions.transport_sockets.tls.v3.CertificateValidationContext":                                  {"trusted_ca", "match_typed_subject_alt_names"},
	"envoy.extensions.transport_sockets.tls.v3.SubjectAltNameMatcher":                                         {"san_type", "matcher"},
	"envoy.type.matcher.v3.StringMatcher":                                                                     {"exact"},
}

// leaves are message types accepted whole.
var leaves = map[protoreflect.FullName]bool{
	"google.protobuf.Duration":    true,
	"google.protobuf.UInt32Value": true,
	"google.protobuf.UInt64Value": true,
	"google.protobuf.BoolValue":   true,
	"google.protobuf.Struct":      true,
}

// checkSupported walks m and reports every set field the front does not emulate.
func checkSupported(m protoreflect.Message, path string, problems *[]string) {
	name := m.Descriptor().FullName()
	if leaves[name] {
		return
	}
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			*problems = append(*problems, fmt.Sprintf("%s: %v", path, err))
			return
		}
		checkSupported(inner.ProtoReflect(), path+"("+string(inner.ProtoReflect().Descriptor().FullName())+")", problems)
		return
	}
	fields, ok := allowed[name]
	if !ok {
		*problems = append(*problems, fmt.Sprintf("%s: message type %s is not emulated", path, name))
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fpath := path + "." + string(fd.Name())
		if !containsName(fields, fd.Name()) {
			*problems = append(*problems, fmt.Sprintf("%s: setting not emulated by the Envoy test front", fpath))
			return true
		}
		switch {
		case fd.Kind() != protoreflect.MessageKind:
		case fd.IsList():
			for i := 0; i < v.List().Len(); i++ {
				checkSupported(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", fpath, i), problems)
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				checkSupported(mv.Message(), fpath+"["+k.String()+"]", problems)
				return true
			})
		default:
			checkSupported(v.Message(), fpath, problems)
		}
		return true
	})
}

func containsName(list []protoreflect.Name, n protoreflect.Name) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// FromBootstrap extracts the emulated configuration from bs, refusing (with every
// problem listed) any setting the front does not emulate.
func FromBootstrap(bs *bootstrapv3.Bootstrap) (*Config, error) {
	var problems []string
	checkSupported(bs.ProtoReflect(), "bootstrap", &problems)
	if len(problems) > 0 {
		return nil, fmt.Errorf("envoy test front: unsupported configuration:\n  %s", strings.Join(problems, "\n  "))
	}
	c := &Config{Clusters: map[string]*Cluster{}}
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var err error
	if c.Overload, err = overloadFrom(bs.GetOverloadManager()); err != nil {
		fail("overload_manager: %v", err)
	}

	for _, cl := range bs.GetStaticResources().GetClusters() {
		cc, err := clusterFrom(cl)
		if err != nil {
			fail("cluster %q: %v", cl.GetName(), err)
			continue
		}
		c.Clusters[cc.Name] = cc
	}
	for _, cc := range c.Clusters {
		if err := checkAttemptCluster(cc.Attempt, c.Clusters); err != nil {
			fail("cluster %q: %v", cc.Name, err)
		}
	}

	if bs.GetDynamicResources() != nil {
		if c.ADS, err = adsFrom(bs); err != nil {
			fail("dynamic_resources: %v", err)
		} else if c.Clusters[c.ADS.Cluster] == nil {
			fail("dynamic_resources: ads_config cluster %q is not a static cluster", c.ADS.Cluster)
		} else if n := len(c.Clusters[c.ADS.Cluster].Endpoints); n != 1 {
			fail("dynamic_resources: ads_config cluster %q: exactly one endpoint is emulated, found %d", c.ADS.Cluster, n)
		}
	}

	ls := bs.GetStaticResources().GetListeners()
	if len(ls) != 1 {
		fail("exactly one listener is emulated, found %d", len(ls))
		return nil, joinProblems(problems)
	}
	l := ls[0]
	c.Listen = socketAddr(l.GetAddress().GetSocketAddress())
	if a := bs.GetAdmin().GetAddress().GetSocketAddress(); a != nil {
		c.Admin = socketAddr(a)
	}
	c.BufferLimit = defaultBufferLimit
	if v := l.GetPerConnectionBufferLimitBytes(); v != nil {
		c.BufferLimit = int64(v.GetValue())
	}
	if len(l.GetFilterChains()) != 1 || len(l.GetFilterChains()[0].GetFilters()) != 1 {
		fail("listener: exactly one filter chain with one network filter is emulated")
		return nil, joinProblems(problems)
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		fail("listener filter: only the HTTP connection manager is emulated: %v", err)
		return nil, joinProblems(problems)
	}
	switch hcm.GetCodecType() {
	case hcmv3.HttpConnectionManager_AUTO, hcmv3.HttpConnectionManager_HTTP1, hcmv3.HttpConnectionManager_HTTP2:
	default:
		fail("codec_type %v not emulated", hcm.GetCodecType())
	}
	c.StreamIdleTimeout = 5 * time.Minute // Envoy's default
	if d := hcm.GetStreamIdleTimeout(); d != nil {
		c.StreamIdleTimeout = d.AsDuration()
	}
	c.MaxConcurrentStreams = 2147483647
	if h2 := hcm.GetHttp2ProtocolOptions(); h2 != nil {
		if h2.GetConnectionKeepalive() != nil {
			fail("http2_protocol_options.connection_keepalive of the connection manager not emulated")
		}
		if v := h2.GetMaxConcurrentStreams(); v != nil {
			c.MaxConcurrentStreams = v.GetValue()
		}
	}
	if d := hcm.GetRequestTimeout(); d != nil {
		c.RequestTimeout = d.AsDuration()
	}
	c.UseRemoteAddress = hcm.GetUseRemoteAddress().GetValue()
	c.XffNumTrustedHops = int(hcm.GetXffNumTrustedHops())
	c.AlwaysSetRequestID = hcm.GetAlwaysSetRequestIdInResponse()
	if iac := hcm.GetInternalAddressConfig(); iac != nil {
		if len(iac.GetCidrRanges()) == 0 {
			// Envoy versions differ here (some fall back to RFC 1918 + loopback).
			fail("internal_address_config without cidr_ranges not emulated")
		}
		for i, r := range iac.GetCidrRanges() {
			a, err := netip.ParseAddr(r.GetAddressPrefix())
			n := int(r.GetPrefixLen().GetValue())
			if err != nil || n > a.BitLen() {
				fail("internal_address_config.cidr_ranges[%d]: invalid range %s/%d", i, r.GetAddressPrefix(), n)
				continue
			}
			c.InternalRanges = append(c.InternalRanges, netip.PrefixFrom(a, n).Masked())
		}
	}

	vhs := hcm.GetRouteConfig().GetVirtualHosts()
	if len(vhs) != 1 || len(vhs[0].GetDomains()) != 1 || vhs[0].GetDomains()[0] != "*" {
		fail("exactly one virtual host with domains [\"*\"] is emulated")
	} else {
		for i, r := range vhs[0].GetRoutes() {
			rr, err := routeFrom(r)
			if err != nil {
				fail("route %d: %v", i, err)
				continue
			}
			if rr.Cluster != "" && c.Clusters[rr.Cluster] == nil {
				fail("route %d: cluster %q is not defined", i, rr.Cluster)
			}
			c.Routes = append(c.Routes, rr)
		}
	}

	filters := hcm.GetHttpFilters()
	if len(filters) != 2 {
		fail("http_filters: exactly [ext_proc, router] is emulated, found %d filters", len(filters))
	} else {
		ep := &extprocv3.ExternalProcessor{}
		if err := filters[0].GetTypedConfig().UnmarshalTo(ep); err != nil {
			fail("http_filters[0]: only ext_proc is emulated first: %v", err)
		} else if err := extProcFrom(ep, &c.ExtProc); err != nil {
			fail("ext_proc: %v", err)
		} else if c.Clusters[c.ExtProc.Cluster] == nil {
			fail("ext_proc: grpc_service cluster %q is not defined", c.ExtProc.Cluster)
		} else if n := len(c.Clusters[c.ExtProc.Cluster].Endpoints); n != 1 {
			fail("ext_proc: grpc_service cluster %q: exactly one endpoint is emulated, found %d", c.ExtProc.Cluster, n)
		}
		if !filters[1].GetTypedConfig().MessageIs(&routerv3.Router{}) {
			fail("http_filters[1]: the last filter must be the router")
		}
	}

	if al, err := accessLogFrom(hcm.GetAccessLog()); err != nil {
		fail("access_log: %v", err)
	} else {
		c.AccessLog = al
	}

	for i, m := range hcm.GetLocalReplyConfig().GetMappers() {
		mm, err := mapperFrom(m)
		if err != nil {
			fail("local_reply_config.mappers[%d]: %v", i, err)
			continue
		}
		c.LocalReply = append(c.LocalReply, mm)
	}
	if len(problems) > 0 {
		return nil, joinProblems(problems)
	}
	return c, nil
}

func joinProblems(p []string) error {
	return errors.New("envoy test front: unsupported configuration:\n  " + strings.Join(p, "\n  "))
}

func socketAddr(sa *corev3.SocketAddress) string {
	return net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))
}

func clusterFrom(cl *clusterv3.Cluster) (*Cluster, error) {
	src, err := proto.MarshalOptions{Deterministic: true}.Marshal(cl)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: cl.GetName(), source: string(src)}
	switch cl.GetType() {
	case clusterv3.Cluster_STATIC:
	case clusterv3.Cluster_LOGICAL_DNS, clusterv3.Cluster_STRICT_DNS:
		c.DNS = true
	default:
		return nil, fmt.Errorf("cluster type %v not emulated", cl.GetType())
	}
	eps, err := endpointsFrom(cl)
	if err != nil {
		return nil, err
	}
	c.Endpoints = eps
	if len(eps) > 0 {
		c.Addr, c.Host = eps[0].Addr, eps[0].Name
	}
	for name, a := range cl.GetTypedExtensionProtocolOptions() {
		opts := &httpv3.HttpProtocolOptions{}
		if err := a.UnmarshalTo(opts); err != nil {
			return nil, fmt.Errorf("typed_extension_protocol_options[%s]: %v", name, err)
		}
		h2 := opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions()
		c.HTTP2 = h2 != nil
		if h2.GetMaxConcurrentStreams() != nil {
			return nil, errors.New("http2_protocol_options.max_concurrent_streams of a cluster not emulated")
		}
		if c.Attempt, err = attemptFiltersFrom(opts.GetHttpFilters()); err != nil {
			return nil, err
		}
		if ka := h2.GetConnectionKeepalive(); ka != nil {
			c.KeepaliveInterval = ka.GetInterval().AsDuration()
			c.KeepaliveTimeout = durationOr(ka.GetTimeout(), 0)
			if c.KeepaliveInterval <= 0 || c.KeepaliveTimeout <= 0 {
				return nil, errors.New("connection_keepalive: interval and timeout are required")
			}
		}
	}
	if c.Attempt != nil {
		if err := c.Attempt.checkAttributeValues(c.Endpoints); err != nil {
			return nil, err
		}
	}
	maxConn, maxPending, maxReq := uint32(defaultCircuitBreaker), uint32(defaultCircuitBreaker), uint32(defaultCircuitBreaker)
	c.MaxRetries = defaultMaxRetries
	th := cl.GetCircuitBreakers().GetThresholds()
	if len(th) > 1 {
		return nil, errors.New("circuit_breakers: only one (DEFAULT priority) threshold is emulated")
	}
	if len(th) == 1 {
		if v := th[0].GetMaxConnections(); v != nil {
			maxConn = v.GetValue()
		}
		if v := th[0].GetMaxPendingRequests(); v != nil {
			maxPending = v.GetValue()
		}
		if v := th[0].GetMaxRequests(); v != nil {
			maxReq = v.GetValue()
		}
		if v := th[0].GetMaxRetries(); v != nil {
			c.MaxRetries = int(v.GetValue())
		}
	}
	c.MaxInFlight = int(maxReq)
	if !c.HTTP2 && int(maxConn)+int(maxPending) < c.MaxInFlight {
		c.MaxInFlight = int(maxConn) + int(maxPending)
	}
	if ts := cl.GetTransportSocket(); ts != nil {
		up := &tlsv3.UpstreamTlsContext{}
		if err := ts.GetTypedConfig().UnmarshalTo(up); err != nil {
			return nil, fmt.Errorf("transport_socket: only UpstreamTlsContext is emulated: %v", err)
		}
		tc, err := tlsConfigFrom(up)
		if err != nil {
			return nil, err
		}
		c.TLS = tc
	}
	if err := c.resolveSockets(cl.GetTransportSocketMatches()); err != nil {
		return nil, err
	}
	return c, nil
}

// tlsConfigFrom builds a client TLS configuration as Envoy's UpstreamTlsContext
// behaves: SNI from sni; the chain verified against trusted_ca; the certificate's DNS
// SANs checked against match_typed_subject_alt_names (exact matchers). Like Envoy, the
// SNI itself is not checked against the certificate.
func tlsConfigFrom(up *tlsv3.UpstreamTlsContext) (*tls.Config, error) {
	vc := up.GetCommonTlsContext().GetValidationContext()
	var roots *x509.CertPool
	switch f := vc.GetTrustedCa().GetFilename(); {
	case f != "":
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("trusted_ca: %v", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("trusted_ca %s: no certificates", f)
		}
	case vc.GetTrustedCa() != nil:
		return nil, errors.New("trusted_ca: only filename is emulated")
	default:
		return nil, errors.New("a TLS cluster without trusted_ca (no verification) is not emulated")
	}
	var sans []string
	for _, m := range vc.GetMatchTypedSubjectAltNames() {
		if m.GetSanType() != tlsv3.SubjectAltNameMatcher_DNS || m.GetMatcher().GetExact() == "" {
			return nil, errors.New("match_typed_subject_alt_names: only DNS exact matchers are emulated")
		}
		sans = append(sans, m.GetMatcher().GetExact())
	}
	return &tls.Config{
		ServerName: up.GetSni(),
		MinVersion: tls.VersionTLS12,
		// Verification is done below, Envoy's way (chain + SAN matchers, not the SNI).
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no peer certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			leaf := cs.PeerCertificates[0]
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter}); err != nil {
				return err
			}
			if len(sans) == 0 {
				return nil
			}
			for _, want := range sans {
				for _, got := range leaf.DNSNames {
					if got == want {
						return nil
					}
				}
			}
			return fmt.Errorf("certificate SANs %v match none of %v", leaf.DNSNames, sans)
		},
	}, nil
}

func routeFrom(r *routev3.Route) (Route, error) {
	var rr Route
	rr.Prefix = r.GetMatch().GetPrefix()
	if rr.Prefix == "" {
		return rr, errors.New("only prefix matches are emulated")
	}
	for _, h := range r.GetRequestHeadersToRemove() {
		h = strings.ToLower(h)
		// Envoy refuses these at load (HeaderParser::configure: ":-prefixed or host
		// headers may not be removed").
		if h == "" || strings.HasPrefix(h, ":") || h == "host" {
			return rr, fmt.Errorf("request_headers_to_remove: %q may not be removed", h)
		}
		rr.RequestHeadersToRemove = append(rr.RequestHeadersToRemove, h)
	}
	ra := r.GetRoute()
	if ra == nil {
		return rr, errors.New("only route actions are emulated")
	}
	switch {
	case ra.GetClusterHeader() != "":
		rr.ClusterHeader = strings.ToLower(ra.GetClusterHeader())
	case ra.GetCluster() != "":
		rr.Cluster = ra.GetCluster()
	default:
		return rr, errors.New("only cluster and cluster_header are emulated")
	}
	switch ra.GetClusterNotFoundResponseCode() {
	case routev3.RouteAction_SERVICE_UNAVAILABLE:
		rr.ClusterNotFoundStatus = 503
	case routev3.RouteAction_NOT_FOUND:
		rr.ClusterNotFoundStatus = 404
	case routev3.RouteAction_INTERNAL_SERVER_ERROR:
		rr.ClusterNotFoundStatus = 500
	}
	rr.AutoHostRewrite = ra.GetAutoHostRewrite().GetValue()
	if d := ra.GetTimeout(); d != nil && d.AsDuration() != 0 {
		return rr, errors.New("route timeout other than 0s not emulated")
	}
	if d := ra.GetIdleTimeout(); d != nil {
		rr.IdleTimeout = d.AsDuration()
	}
	rp, err := retryPolicyFrom(ra.GetRetryPolicy())
	if err != nil {
		return rr, err
	}
	rr.Retry = rp
	return rr, nil
}

func extProcFrom(ep *extprocv3.ExternalProcessor, out *ExtProc) error {
	out.Cluster = ep.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	if out.Cluster == "" {
		return errors.New("grpc_service.envoy_grpc.cluster_name is required")
	}
	// Emulated for an upstream ext_proc only (upstreamfilters.go).
	if len(ep.GetGrpcService().GetInitialMetadata()) > 0 || len(ep.GetRequestAttributes()) > 0 {
		return errors.New("grpc_service.initial_metadata and request_attributes of the connection manager's ext_proc not emulated")
	}
	if ep.GetFailureModeAllow() {
		return errors.New("failure_mode_allow: true not emulated")
	}
	out.AllowModeOverride = ep.GetAllowModeOverride()
	out.AllowEnvoy = ep.GetMutationRules().GetAllowEnvoy().GetValue()
	out.AllowAllRouting = ep.GetMutationRules().GetAllowAllRouting().GetValue()
	out.ReceivingNamespaces = ep.GetMetadataOptions().GetReceivingNamespaces().GetUntyped()
	out.MessageTimeout = durationOr(ep.GetMessageTimeout(), 200*time.Millisecond)
	out.MaxMessageTimeout = durationOr(ep.GetMaxMessageTimeout(), 0)
	pm := ep.GetProcessingMode()
	out.Mode = Mode{
		RequestHeader: pm.GetRequestHeaderMode(), RequestBody: pm.GetRequestBodyMode(),
		ResponseHeader: pm.GetResponseHeaderMode(), ResponseBody: pm.GetResponseBodyMode(),
	}
	// DEFAULT header mode means SEND.
	if out.Mode.RequestHeader == extprocv3.ProcessingMode_DEFAULT {
		out.Mode.RequestHeader = extprocv3.ProcessingMode_SEND
	}
	if out.Mode.ResponseHeader == extprocv3.ProcessingMode_DEFAULT {
		out.Mode.ResponseHeader = extprocv3.ProcessingMode_SEND
	}
	var errs []string
	if out.Mode.RequestHeader != extprocv3.ProcessingMode_SEND || out.Mode.ResponseHeader != extprocv3.ProcessingMode_SEND {
		errs = append(errs, "processing_mode: header modes other than SEND not emulated")
	}
	if !requestBodyModeOK(out.Mode.RequestBody) {
		errs = append(errs, fmt.Sprintf("processing_mode.request_body_mode %v not emulated", out.Mode.RequestBody))
	}
	if !responseBodyModeOK(out.Mode.ResponseBody) {
		errs = append(errs, fmt.Sprintf("processing_mode.response_body_mode %v not emulated", out.Mode.ResponseBody))
	}
	for _, tm := range []extprocv3.ProcessingMode_HeaderSendMode{pm.GetRequestTrailerMode(), pm.GetResponseTrailerMode()} {
		if tm != extprocv3.ProcessingMode_SKIP && tm != extprocv3.ProcessingMode_DEFAULT {
			errs = append(errs, "processing_mode: trailer modes other than SKIP not emulated")
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func requestBodyModeOK(m extprocv3.ProcessingMode_BodySendMode) bool {
	return m == extprocv3.ProcessingMode_NONE || m == extprocv3.ProcessingMode_BUFFERED
}

func responseBodyModeOK(m extprocv3.ProcessingMode_BodySendMode) bool {
	return m == extprocv3.ProcessingMode_NONE || m == extprocv3.ProcessingMode_BUFFERED ||
		m == extprocv3.ProcessingMode_STREAMED
}

func durationOr(d *durationpb.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.AsDuration()
}

// ServerHTTP2 is the downstream HTTP/2 configuration the front's server must use.
func (c *Config) ServerHTTP2() *http.HTTP2Config {
	return &http.HTTP2Config{MaxConcurrentStreams: int(c.MaxConcurrentStreams)}
}
