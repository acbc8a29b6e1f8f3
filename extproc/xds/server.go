package xds

import (
	"context"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/llmgw/gateway/extproc/catalog"
)

// everyNode is the snapshot key: every Envoy of the deployment gets the same clusters,
// whatever its node id, so an Envoy that reconnects to another extproc replica (which
// serves the same catalog, hence the same version) sees no change.
type everyNode struct{}

func (everyNode) ID(*corev3.Node) string { return "gateway" }

// Server is the xDS server. Safe for concurrent use.
type Server struct {
	cache  cachev3.SnapshotCache
	srv    serverv3.Server
	cancel context.CancelFunc
	log    *zap.Logger
}

// New returns a Server with no snapshot: Envoy's requests wait until the first Update.
func New(log *zap.Logger) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cache: cachev3.NewSnapshotCache(true, everyNode{}, log.Sugar()), cancel: cancel, log: log}
	s.srv = serverv3.NewServer(ctx, s.cache, serverv3.CallbackFuncs{StreamRequestFunc: s.onRequest})
	return s
}

// onRequest logs an Envoy's refusal (NACK) of a snapshot: its error says which cluster.
func (s *Server) onRequest(_ int64, req *discoveryv3.DiscoveryRequest) error {
	if d := req.GetErrorDetail(); d != nil {
		s.log.Error("Envoy refused the clusters", zap.String("node", req.GetNode().GetId()),
			zap.String("version", req.GetResponseNonce()), zap.String("error", d.GetMessage()))
	}
	return nil
}

// Update serves the catalog's clusters as the snapshot labelled version.
func (s *Server) Update(cat *catalog.Catalog, version string) error {
	snap, err := Snapshot(cat, version)
	if err != nil {
		return err
	}
	return s.cache.SetSnapshot(context.Background(), everyNode{}.ID(nil), snap)
}

// Snapshot is the catalog's clusters as one consistent snapshot.
func Snapshot(cat *catalog.Catalog, version string) (*cachev3.Snapshot, error) {
	cls, err := Clusters(cat)
	if err != nil {
		return nil, err
	}
	res := make([]types.Resource, len(cls))
	for i, c := range cls {
		res[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.ClusterType: res})
	if err != nil {
		return nil, err
	}
	if err := snap.Consistent(); err != nil {
		return nil, fmt.Errorf("xds snapshot %s: %w", version, err)
	}
	return snap, nil
}

// Register serves ADS (and CDS alone) on gs.
func (s *Server) Register(gs *grpc.Server) {
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, s.srv)
	clusterservice.RegisterClusterDiscoveryServiceServer(gs, s.srv)
}

// Stop ends every open discovery stream (Envoy keeps its clusters and reconnects, to
// another replica when this one is draining).
func (s *Server) Stop() { s.cancel() }
