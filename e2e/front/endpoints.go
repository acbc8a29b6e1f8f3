package front

import (
	"crypto/tls"
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// Host is one endpoint of a cluster, as Envoy's upstream HostImpl holds it.
type Host struct {
	// Addr is host:port.
	Addr string
	// Name is the socket address's host part (auto_host_rewrite uses it for DNS clusters).
	Name string
	// Priority is the priority of the endpoint's LocalityLbEndpoints (0 is the highest).
	Priority int
	// Healthy: the EDS health_status lets the host serve. HEALTHY and UNKNOWN do; UNHEALTHY,
	// DRAINING and TIMEOUT set the host's FAILED_EDS_HEALTH / EDS_STATUS_DRAINING flag, so it
	// is left out of the priority's healthy hosts (source/common/upstream/upstream_impl.cc,
	// HostImplBase's health flags from the endpoint's health_status).
	Healthy bool
	// Weight is load_balancing_weight (default 1).
	Weight uint32
	// Metadata is the endpoint's metadata.filter_metadata.
	Metadata map[string]*structpb.Struct
	// TLS is the client TLS of the host's transport socket (nil: plaintext), and socket
	// which one it is: 0 the cluster's transport_socket, i+1 transport_socket_matches[i]
	// (socketmatch.go).
	TLS    *tls.Config
	socket int
}

// endpointsFrom reads a cluster's load_assignment: every endpoint with its priority,
// health, weight and metadata, in configuration order (the order of a priority's host
// list, PriorityStateManager::registerHostForPriority in upstream_impl.cc).
func endpointsFrom(cl *clusterv3.Cluster) ([]*Host, error) {
	var hosts []*Host
	for _, le := range cl.GetLoadAssignment().GetEndpoints() {
		for _, lb := range le.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			h := &Host{Addr: socketAddr(sa), Name: sa.GetAddress(), Priority: int(le.GetPriority()), Weight: 1}
			switch lb.GetHealthStatus() {
			case corev3.HealthStatus_UNKNOWN, corev3.HealthStatus_HEALTHY:
				h.Healthy = true
			case corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_DRAINING, corev3.HealthStatus_TIMEOUT:
			default:
				// DEGRADED hosts get their own (degraded) priority load in Envoy; not emulated.
				return nil, fmt.Errorf("endpoint %s: health_status %v not emulated (HEALTHY, UNKNOWN, UNHEALTHY, DRAINING, TIMEOUT are)", h.Addr, lb.GetHealthStatus())
			}
			if w := lb.GetLoadBalancingWeight(); w != nil {
				if w.GetValue() == 0 {
					return nil, fmt.Errorf("endpoint %s: load_balancing_weight must be at least 1", h.Addr)
				}
				h.Weight = w.GetValue()
			}
			h.Metadata = lb.GetMetadata().GetFilterMetadata()
			hosts = append(hosts, h)
		}
	}
	if cl.GetType() != clusterv3.Cluster_STATIC && len(hosts) != 1 {
		return nil, fmt.Errorf("exactly one endpoint is emulated for a DNS cluster, found %d", len(hosts))
	}
	return hosts, nil
}
