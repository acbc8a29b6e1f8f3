// Package xds serves the catalog's upstream clusters to Envoy over the aggregated
// discovery service (ADS, state of the world) with go-control-plane's snapshot cache, so
// a new channel on a new provider host becomes routable without restarting Envoy.
//
// Clusters translates a catalog into Envoy clusters (a pure function); Server holds one
// snapshot, versioned by the catalog's version, that every Envoy gets. extproc registers
// Server on its own gRPC server and calls Update whenever its catalog reloads.
//
// It depends on the catalog and go-control-plane; it must not import the request
// lifecycle, accounting or anything of the front.
package xds

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/llmgw/gateway/extproc/catalog"
)

// Clusters returns the Envoy clusters of the catalog's upstreams, in catalog order.
func Clusters(cat *catalog.Catalog) ([]*clusterv3.Cluster, error) {
	out := make([]*clusterv3.Cluster, 0, len(cat.Clusters()))
	for _, c := range cat.Clusters() {
		cl, err := cluster(c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c, err)
		}
		out = append(out, cl)
	}
	return out, nil
}

func cluster(c *catalog.Cluster) (*clusterv3.Cluster, error) {
	limit := wrapperspb.UInt32(uint32(c.RequestLimit()))
	cl := &clusterv3.Cluster{
		Name:                 c.Name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(c.Timeout()),
		// A long generation holds a request for minutes: Envoy's default of 1024
		// requests per cluster would answer the next ones 503 overflow.
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			MaxConnections: limit, MaxPendingRequests: limit, MaxRequests: limit,
		}}},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: c.Name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socketAddress(c)}},
			}}}},
		},
	}
	if c.IsDNS() {
		cl.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS}
		cl.DnsLookupFamily = clusterv3.Cluster_V4_PREFERRED
	}
	if c.TLS {
		ts, err := tlsSocket(c)
		if err != nil {
			return nil, err
		}
		cl.TransportSocket = ts
	}
	if err := cl.ValidateAll(); err != nil {
		return nil, err
	}
	return cl, nil
}

// socketAddress is the cluster's endpoint address.
func socketAddress(c *catalog.Cluster) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: c.Host(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(c.Port())},
	}}}
}

// tlsSocket is the cluster's TLS: SNI and a SAN check for its server name, certificates
// verified against its CA bundle.
func tlsSocket(c *catalog.Cluster) (*corev3.TransportSocket, error) {
	tc, err := anypb.New(&tlsv3.UpstreamTlsContext{
		Sni: c.ServerName(),
		CommonTlsContext: &tlsv3.CommonTlsContext{
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: c.CABundle()}},
				MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
					SanType: tlsv3.SubjectAltNameMatcher_DNS,
					Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: c.ServerName()}},
				}},
			}},
		},
	})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tc}}, nil
}
