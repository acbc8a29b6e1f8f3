package front

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// clusterTypeURL is the CDS resource type.
const clusterTypeURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

// ADS is the emulated subset of dynamic_resources: clusters (CDS) over one aggregated
// discovery stream (state of the world, API v3) to a static gRPC cluster.
type ADS struct {
	// Cluster is the static cluster of the ADS gRPC service (envoy_grpc).
	Cluster string
	// Node is the bootstrap's node, sent on each stream's first request.
	Node *corev3.Node
	// InitialFetchTimeout is how long start-up waits for the first CDS response (0:
	// for ever). Envoy's default is 15 s (config_source.proto, initial_fetch_timeout).
	InitialFetchTimeout time.Duration
}

// Envoy's xDS gRPC stream retries a broken stream with a jittered exponential back-off
// from 500 ms to 30 s (source/common/config/subscription_factory_impl.cc,
// SubscriptionFactory::RetryInitialDelayMs / RetryMaxDelayMs; JitteredExponentialBackOffStrategy).
const (
	adsRetryInitial = 500 * time.Millisecond
	adsRetryMax     = 30 * time.Second
)

func adsFrom(bs *bootstrapv3.Bootstrap) (*ADS, error) {
	dr := bs.GetDynamicResources()
	ac, cds := dr.GetAdsConfig(), dr.GetCdsConfig()
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if ac == nil || cds == nil {
		return nil, errors.New("only ads_config with cds_config over ADS is emulated")
	}
	if ac.GetApiType() != corev3.ApiConfigSource_GRPC {
		fail("ads_config.api_type %v not emulated (GRPC only: state of the world)", ac.GetApiType())
	}
	if ac.GetTransportApiVersion() != corev3.ApiVersion_V3 || cds.GetResourceApiVersion() != corev3.ApiVersion_V3 {
		fail("only API version V3 is emulated")
	}
	if len(ac.GetGrpcServices()) != 1 {
		fail("ads_config: exactly one grpc_services entry is emulated")
	} else if len(ac.GetGrpcServices()[0].GetInitialMetadata()) > 0 {
		fail("ads_config: grpc_services initial_metadata not emulated")
	}
	if cds.GetAds() == nil {
		fail("cds_config: only ads is emulated")
	}
	// Envoy refuses ADS without the node's id and cluster (source/common/config/utility.cc,
	// Utility::checkLocalInfo).
	if bs.GetNode().GetId() == "" || bs.GetNode().GetCluster() == "" {
		fail("ADS needs node.id and node.cluster")
	}
	if !ac.GetSetNodeOnFirstMessageOnly() {
		fail("ads_config.set_node_on_first_message_only: false not emulated")
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	a := &ADS{
		Cluster: ac.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName(),
		Node:    &corev3.Node{Id: bs.GetNode().GetId(), Cluster: bs.GetNode().GetCluster()},
		// Envoy's default initial_fetch_timeout.
		InitialFetchTimeout: 15 * time.Second,
	}
	if d := cds.GetInitialFetchTimeout(); d != nil {
		a.InitialFetchTimeout = d.AsDuration()
	}
	return a, nil
}

// cdsClient keeps the front's dynamic clusters equal to what the ADS server sends, as
// Envoy's CDS over a gRPC mux does: one stream, the node on its first request, every
// response ACKed with its version and nonce or NACKed with the last accepted version
// and the reasons; a broken stream is opened again after a back-off, asking with the
// last accepted version; the clusters stay as they were meanwhile.
type cdsClient struct {
	ads     *ADS
	conn    grpc.ClientConnInterface
	table   *clusterTable
	logf    func(string, ...any)
	ready   chan struct{} // closed after the first response was applied (or refused)
	started bool
	// accepted is the last version applied in full.
	accepted string
}

func (c *cdsClient) markReady() {
	if !c.started {
		c.started = true
		close(c.ready)
	}
}

// run holds the stream until ctx ends.
func (c *cdsClient) run(ctx context.Context) {
	back := newJitteredBackoff(adsRetryInitial, adsRetryMax)
	for ctx.Err() == nil {
		if c.stream(ctx) {
			back = newJitteredBackoff(adsRetryInitial, adsRetryMax)
		}
		select {
		case <-ctx.Done():
		case <-time.After(back.wait(rand.Uint64())):
		}
	}
}

// stream runs one ADS stream; it reports whether any response arrived.
func (c *cdsClient) stream(ctx context.Context) (got bool) {
	// The stream is a request on its cluster: it holds one of the cluster's circuit-breaker
	// slots while open (Envoy's gRPC async client sends through the cluster's pool).
	up := c.table.get(c.ads.Cluster)
	if !up.acquire() {
		c.logf("ads: cluster %s overflow", c.ads.Cluster)
		return false
	}
	defer up.release()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(c.conn).StreamAggregatedResources(sctx)
	if err != nil {
		c.logf("ads: %v", err)
		return false
	}
	req := &discoveryv3.DiscoveryRequest{Node: c.ads.Node, TypeUrl: clusterTypeURL, VersionInfo: c.accepted}
	for {
		if err := st.Send(req); err != nil {
			return got
		}
		resp, err := st.Recv()
		if err != nil {
			if ctx.Err() == nil {
				c.logf("ads: stream ended: %v", err)
			}
			return got
		}
		got = true
		req = &discoveryv3.DiscoveryRequest{TypeUrl: clusterTypeURL, ResponseNonce: resp.GetNonce()}
		if resp.GetTypeUrl() != clusterTypeURL {
			req.VersionInfo = c.accepted
			req.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: "type " + resp.GetTypeUrl() + " not subscribed"}
			continue
		}
		if problems := c.apply(resp); len(problems) > 0 {
			c.logf("ads: clusters of version %s refused: %s", resp.GetVersionInfo(), strings.Join(problems, "; "))
			req.VersionInfo = c.accepted
			req.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: strings.Join(problems, "\n")}
		} else {
			c.accepted = resp.GetVersionInfo()
			req.VersionInfo = c.accepted
		}
		c.markReady()
	}
}

// apply installs the response's clusters: each valid one is applied, those the front
// does not emulate (or Envoy would refuse) are reported, and a cluster absent from the
// response is removed (CdsApiHelper::onConfigUpdate applies each cluster on its own
// and collects the failures for the NACK; the state-of-the-world CDS removes the
// clusters an update no longer names).
func (c *cdsClient) apply(resp *discoveryv3.DiscoveryResponse) []string {
	var problems []string
	var clusters []*Cluster
	seen := map[string]bool{}
	for _, r := range resp.GetResources() {
		var pc clusterv3.Cluster
		if err := r.UnmarshalTo(&pc); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		var unsupported []string
		checkSupported(pc.ProtoReflect(), "cluster", &unsupported)
		if err := pc.ValidateAll(); err != nil {
			unsupported = append(unsupported, err.Error())
		}
		if seen[pc.GetName()] {
			unsupported = append(unsupported, "duplicate cluster "+pc.GetName())
		}
		if c.table.static[pc.GetName()] {
			unsupported = append(unsupported, "a static cluster of that name exists")
		}
		cl, err := clusterFrom(&pc)
		if err != nil {
			unsupported = append(unsupported, err.Error())
		} else if err := checkAttemptCluster(cl.Attempt, c.table.staticConfigs()); err != nil {
			unsupported = append(unsupported, err.Error())
		}
		if len(unsupported) > 0 {
			problems = append(problems, pc.GetName()+": "+strings.Join(unsupported, ", "))
			if old := c.table.get(pc.GetName()); old != nil && !c.table.static[pc.GetName()] {
				// A refused update leaves the cluster as it was.
				clusters = append(clusters, old.cfg)
			}
			continue
		}
		seen[pc.GetName()] = true
		clusters = append(clusters, cl)
	}
	changed, removed := c.table.replaceDynamic(clusters)
	if len(changed)+len(removed) > 0 {
		c.logf("cds: version %s: added/updated %v, removed %v", resp.GetVersionInfo(), changed, removed)
	}
	return problems
}
