package xds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

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

// Options add the failover clusters to the snapshot.
type Options struct {
	// Failover serves the failover clusters of the catalog's chat models (FailoverClusters),
	// their endpoints' health from Healthy, the attempts' ext_proc on ExtprocCluster.
	Failover       bool
	Healthy        func(channel string) bool
	ExtprocCluster string
}

// Server is the xDS server. Safe for concurrent use.
type Server struct {
	cache  cachev3.SnapshotCache
	srv    serverv3.Server
	cancel context.CancelFunc
	log    *zap.Logger
	opts   Options

	mu      sync.Mutex
	cat     *catalog.Catalog
	version string // the catalog's
	served  string // the snapshot's: the catalog's, and with failover its unhealthy channels
}

// New returns a Server with no snapshot: Envoy's requests wait until the first Update.
func New(log *zap.Logger, opts ...Options) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cache: cachev3.NewSnapshotCache(true, everyNode{}, log.Sugar()), cancel: cancel, log: log}
	if len(opts) > 0 {
		s.opts = opts[0]
	}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cat, s.version = cat, version
	return s.push(true)
}

// Refresh serves the channels' health as it is now, when it changed (a new snapshot
// version; Envoy rebuilds only the failover clusters whose endpoints changed).
func (s *Server) Refresh() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cat == nil || !s.opts.Failover {
		return nil
	}
	return s.push(false)
}

// push sets the snapshot; unless always, only when its version changed.
func (s *Server) push(always bool) error {
	version := s.version
	var extra []*clusterv3.Cluster
	if s.opts.Failover {
		var down []string
		for _, m := range s.cat.Models() {
			for _, ch := range m.Channels() {
				if !s.opts.Healthy(ch.Name) && !slices.Contains(down, ch.Name) {
					down = append(down, ch.Name)
				}
			}
		}
		if len(down) > 0 {
			slices.Sort(down)
			sum := sha256.Sum256([]byte(strings.Join(down, "\x00")))
			version += "-" + hex.EncodeToString(sum[:4])
		}
		if !always && version == s.served {
			return nil
		}
		// The clusters say exactly the health the version names (read once: it may change
		// meanwhile).
		healthy := func(ch string) bool { _, d := slices.BinarySearch(down, ch); return !d }
		var err error
		if extra, err = FailoverClusters(s.cat, healthy, s.opts.ExtprocCluster); err != nil {
			return err
		}
	}
	snap, err := Snapshot(s.cat, version, extra...)
	if err != nil {
		return err
	}
	if err := s.cache.SetSnapshot(context.Background(), everyNode{}.ID(nil), snap); err != nil {
		return err
	}
	s.served = version
	return nil
}

// Snapshot is the catalog's clusters (and extra ones) as one consistent snapshot.
func Snapshot(cat *catalog.Catalog, version string, extra ...*clusterv3.Cluster) (*cachev3.Snapshot, error) {
	cls, err := Clusters(cat)
	if err != nil {
		return nil, err
	}
	cls = append(cls, extra...)
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
