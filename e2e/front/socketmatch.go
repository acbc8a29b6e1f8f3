package front

import (
	"crypto/tls"
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// socketMatchNamespace is the endpoint metadata namespace transport_socket_matches
// match on (MetadataFilters ENVOY_TRANSPORT_SOCKET_MATCH).
const socketMatchNamespace = "envoy.transport_socket_match"

// SocketMatch is one of a cluster's transport_socket_matches: its match labels and
// the client TLS of its transport socket (an UpstreamTlsContext, as for the cluster's
// transport_socket).
type SocketMatch struct {
	Name  string
	Match map[string]*structpb.Value
	TLS   *tls.Config
}

// resolveSockets reads the cluster's transport_socket_matches and gives each host its
// transport socket, as Envoy resolves it when the host is created
// (source/common/upstream/transport_socket_match_impl.cc,
// TransportSocketMatcherImpl::resolve): the first match whose every label equals the
// field of the host's envoy.transport_socket_match metadata
// (Config::Metadata::metadataLabelMatch; an empty match matches every host), else the
// cluster's transport_socket (none: plaintext). Locality metadata, the other place
// Envoy looks, is not emulated (LocalityLbEndpoints.metadata is refused).
func (c *Cluster) resolveSockets(tsms []*clusterv3.Cluster_TransportSocketMatch) error {
	for i, tsm := range tsms {
		up := &tlsv3.UpstreamTlsContext{}
		if err := tsm.GetTransportSocket().GetTypedConfig().UnmarshalTo(up); err != nil {
			return fmt.Errorf("transport_socket_matches[%d]: only UpstreamTlsContext is emulated: %v", i, err)
		}
		tc, err := tlsConfigFrom(up)
		if err != nil {
			return fmt.Errorf("transport_socket_matches[%d]: %v", i, err)
		}
		c.SocketMatches = append(c.SocketMatches, SocketMatch{Name: tsm.GetName(), Match: tsm.GetMatch().GetFields(), TLS: tc})
	}
	for _, h := range c.Endpoints {
		h.TLS, h.socket = c.TLS, 0
		for i, m := range c.SocketMatches {
			if labelsMatch(m.Match, h.Metadata[socketMatchNamespace]) {
				h.TLS, h.socket = m.TLS, i+1
				break
			}
		}
	}
	return nil
}

// labelsMatch is Config::Metadata::metadataLabelMatch without list_as_any: every label
// is a field of md with an equal value.
func labelsMatch(labels map[string]*structpb.Value, md *structpb.Struct) bool {
	for k, want := range labels {
		got, ok := md.GetFields()[k]
		if !ok || !proto.Equal(want, got) {
			return false
		}
	}
	return true
}
