package xds

import (
	"fmt"
	"slices"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	codecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/llmgw/gateway/extproc/catalog"
)

// Failover clusters (docs/design/envoy-extproc.md, "Failover across channels"): for each chat model,
// one cluster per distinct set of channels a request may use (catalog.CandidateSets),
// whose endpoints are those channels' upstreams — the channel's catalog priority as the
// endpoint's priority, its weight as the endpoint's weight, the channel's name in the
// endpoint's metadata, its TLS chosen by transport_socket_matches, and UNHEALTHY while
// this replica's channel health cools it — with an upstream ext_proc that rewrites each
// attempt for the channel Envoy picked.

// MetadataNamespace is the endpoint metadata namespace of failover clusters; its
// ChannelKey names the endpoint's channel (read per attempt through the ext_proc
// attribute AttemptAttribute).
const (
	MetadataNamespace = "llmgw"
	ChannelKey        = "channel"
	// AttemptAttribute is the attribute the upstream ext_proc asks Envoy for: the picked
	// endpoint's channel name. Envoy evaluates it with CEL and sends a map or message
	// only as its printed text, a string or number as itself
	// (source/extensions/filters/http/ext_proc/matching_utils.cc,
	// ExpressionManager::evaluateAttributes), so the path goes down to the string; the
	// value arrives in ProcessingRequest.attributes["envoy.filters.http.ext_proc"] under
	// this expression as its key.
	AttemptAttribute = "xds.upstream_host_metadata.filter_metadata['llmgw']['channel']"
	// AttemptHeader is the gRPC initial metadata that tells extproc a stream is an
	// attempt's (the upstream ext_proc), not a request's.
	AttemptHeader = "x-llmgw-stream"
	AttemptValue  = "attempt"
)

// socketMatchKey is Envoy's endpoint metadata namespace for transport_socket_matches.
const socketMatchKey = "envoy.transport_socket_match"

// FailoverClusters returns the failover clusters of cat's chat models. healthy says
// whether this replica lets a channel take requests; extprocCluster is the Envoy cluster
// of extproc's gRPC server.
func FailoverClusters(cat *catalog.Catalog, healthy func(channel string) bool, extprocCluster string) ([]*clusterv3.Cluster, error) {
	byName := map[string]*catalog.Cluster{}
	for _, c := range cat.Clusters() {
		byName[c.Name] = c
	}
	filters, err := attemptFilters(extprocCluster)
	if err != nil {
		return nil, err
	}
	var out []*clusterv3.Cluster
	for _, m := range cat.Models() {
		switch m.Kind {
		case catalog.KindChat, catalog.KindMessages, catalog.KindResponses:
		default:
			continue
		}
		for _, set := range m.CandidateSets() {
			if len(set) < 2 {
				continue // one channel: nothing to fail over to; requests go to its cluster
			}
			cl, err := failoverCluster(catalog.FailoverCluster(m, set), set, byName, healthy, filters)
			if err != nil {
				return nil, fmt.Errorf("model %s: %w", m.ID, err)
			}
			out = append(out, cl)
		}
	}
	return out, nil
}

func failoverCluster(name string, set []*catalog.Channel, byName map[string]*catalog.Cluster,
	healthy func(string) bool, filters *anypb.Any) (*clusterv3.Cluster, error) {
	var levels []int
	for _, ch := range set {
		if !slices.Contains(levels, ch.Priority) {
			levels = append(levels, ch.Priority)
		}
	}
	slices.Sort(levels)
	limit := wrapperspb.UInt32(uint32(catalog.DefaultMaxRequests))
	cl := &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		// max_retries as high as the requests: its default, 3, is how many retries the
		// whole cluster may have in flight at once (ResourceManager's retries(), checked in
		// RetryStateImpl::shouldRetry), and a failover is one retry per failed channel, so
		// from the fourth request failing over at once each got its failed attempt's 503
		// instead of its next channel (overflow). A request has at most one retry in flight,
		// and its count is x-envoy-max-retries' (routeFailover).
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			MaxConnections: limit, MaxPendingRequests: limit, MaxRequests: limit, MaxRetries: limit,
		}}},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name},
		TypedExtensionProtocolOptions: map[string]*anypb.Any{
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": filters,
		},
	}
	localities := make([]*endpointv3.LocalityLbEndpoints, len(levels))
	for i := range levels {
		localities[i] = &endpointv3.LocalityLbEndpoints{Priority: uint32(i)}
	}
	var timeout time.Duration
	matched := map[string]bool{}
	for _, ch := range set {
		up := byName[ch.Cluster]
		if up == nil {
			return nil, fmt.Errorf("channel %s: no cluster %s", ch.Name, ch.Cluster)
		}
		if up.IsDNS() {
			cl.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
			cl.DnsLookupFamily = clusterv3.Cluster_V4_PREFERRED
		}
		timeout = max(timeout, up.Timeout())
		md := map[string]*structpb.Struct{
			MetadataNamespace: {Fields: map[string]*structpb.Value{ChannelKey: structpb.NewStringValue(ch.Name)}},
		}
		if up.TLS {
			md[socketMatchKey] = &structpb.Struct{Fields: map[string]*structpb.Value{"cluster": structpb.NewStringValue(up.Name)}}
			if !matched[up.Name] {
				matched[up.Name] = true
				ts, err := tlsSocket(up)
				if err != nil {
					return nil, err
				}
				cl.TransportSocketMatches = append(cl.TransportSocketMatches, &clusterv3.Cluster_TransportSocketMatch{
					Name:            up.Name,
					Match:           &structpb.Struct{Fields: map[string]*structpb.Value{"cluster": structpb.NewStringValue(up.Name)}},
					TransportSocket: ts,
				})
			}
		}
		status := corev3.HealthStatus_HEALTHY
		if !healthy(ch.Name) {
			status = corev3.HealthStatus_UNHEALTHY
		}
		loc := localities[slices.Index(levels, ch.Priority)]
		loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{
			HostIdentifier:      &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socketAddress(up)}},
			HealthStatus:        status,
			Metadata:            &corev3.Metadata{FilterMetadata: md},
			LoadBalancingWeight: wrapperspb.UInt32(uint32(ch.EffectiveWeight())),
		})
	}
	cl.ConnectTimeout = durationpb.New(timeout)
	cl.LoadAssignment.Endpoints = localities
	if err := cl.ValidateAll(); err != nil {
		return nil, err
	}
	return cl, nil
}

// attemptFilters is the failover clusters' HttpProtocolOptions: HTTP/1.1 upstream and
// the upstream filter chain [ext_proc, upstream_codec] (an upstream chain must end with
// the codec filter). The ext_proc sees each attempt's request headers with the picked
// endpoint's metadata (AttemptAttribute) and answers with the channel's path,
// credential and body (CONTINUE_AND_REPLACE); it sees the response headers, and asks
// for the body of an error (mode override) to classify it.
func attemptFilters(extprocCluster string) (*anypb.Any, error) {
	ep, err := anypb.New(&extprocv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{
			TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: extprocCluster}},
			InitialMetadata: []*corev3.HeaderValue{{Key: AttemptHeader, Value: AttemptValue}},
		},
		FailureModeAllow: false,
		ProcessingMode: &extprocv3.ProcessingMode{
			RequestHeaderMode:  extprocv3.ProcessingMode_SEND,
			RequestBodyMode:    extprocv3.ProcessingMode_NONE,
			ResponseHeaderMode: extprocv3.ProcessingMode_SEND,
			ResponseBodyMode:   extprocv3.ProcessingMode_NONE,
			RequestTrailerMode: extprocv3.ProcessingMode_SKIP, ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
		},
		AllowModeOverride: true,
		MessageTimeout:    durationpb.New(2e9),
		RequestAttributes: []string{AttemptAttribute},
	})
	if err != nil {
		return nil, err
	}
	codec, err := anypb.New(&codecv3.UpstreamCodec{})
	if err != nil {
		return nil, err
	}
	return anypb.New(&httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "envoy.filters.http.ext_proc", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: ep}},
			{Name: "envoy.filters.http.upstream_codec", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: codec}},
		},
	})
}
