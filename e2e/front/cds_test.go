package front

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/llmgw/gateway/internal/testkit"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// testCluster is a STATIC cluster on addr with the circuit breakers the catalog's
// clusters get.
func testCluster(name, addr string) *clusterv3.Cluster {
	host, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	limit := wrapperspb.UInt32(10000)
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(1e9),
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			MaxConnections: limit, MaxPendingRequests: limit, MaxRequests: limit,
		}}},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
				}}},
			}}}},
		}}},
	}
}

// cdsServer is the fake extproc's xDS side: go-control-plane's server over a snapshot
// cache, as extproc serves it. nacks receives the error of every NACK.
type cdsServer struct {
	cache cachev3.SnapshotCache
	nacks chan string
	n     int
}

type anyNode struct{}

func (anyNode) ID(*corev3.Node) string { return "all" }

func newCDSServer(gs *grpc.Server) *cdsServer {
	s := &cdsServer{cache: cachev3.NewSnapshotCache(true, anyNode{}, nil), nacks: make(chan string, 16)}
	srv := serverv3.NewServer(context.Background(), s.cache, serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discoveryv3.DiscoveryRequest) error {
			if d := r.GetErrorDetail(); d != nil {
				select {
				case s.nacks <- d.GetMessage():
				default:
				}
			}
			return nil
		},
	})
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, srv)
	return s
}

// set serves clusters as the next version.
func (s *cdsServer) set(t testing.TB, clusters ...*clusterv3.Cluster) {
	t.Helper()
	s.n++
	res := make([]types.Resource, len(clusters))
	for i, c := range clusters {
		res[i] = c
	}
	snap, err := cachev3.NewSnapshot("v"+strconv.Itoa(s.n), map[resourcev3.Type][]types.Resource{resourcev3.ClusterType: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cache.SetSnapshot(context.Background(), "all", snap); err != nil {
		t.Fatal(err)
	}
}

// TestCDSLiveClusters: a cluster served later becomes routable without restarting the
// front; a changed address takes the next request; one dropped from the snapshot
// answers cluster_not_found (503 service_unavailable); a cluster with a setting the front
// does not emulate is refused (NACK) while the rest of the update applies; a restarted
// xDS server is reconnected to and the clusters serve meanwhile.
func TestCDSLiveClusters(t *testing.T) {
	serve := func(body string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }))
		t.Cleanup(s.Close)
		return s
	}
	other, third := serve("other upstream"), serve("third upstream")
	// The fake extproc routes to the cluster the request names in x-test-cluster.
	h := newHarness(t, nil, func(s *session) error {
		for m := s.next(); m != nil; m = s.next() {
			switch {
			case m.GetRequestHeaders() != nil:
				target := ""
				for _, hv := range m.GetRequestHeaders().GetHeaders().GetHeaders() {
					if hv.GetKey() == "x-test-cluster" {
						target = string(hv.GetRawValue())
					}
				}
				_ = s.send(routeTo(target))
			case m.GetResponseHeaders() != nil:
				_ = s.send(respHeadersReply(nil))
			}
		}
		return nil
	}, nil)
	get := func(cluster string) (int, string) {
		t.Helper()
		st, _, b := h.do(t, http.MethodGet, "/v1/models", map[string]string{"x-test-cluster": cluster}, nil)
		return st, string(b)
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for range 200 {
			if ok() {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s: never happened", what)
	}
	mock := testCluster("mock-providers", h.upstream.Listener.Addr().String())

	if st, b := get("later"); st != 503 || !strings.Contains(b, "service_unavailable") {
		t.Fatalf("unknown cluster: %d %s", st, b)
	}
	h.cds.set(t, mock, testCluster("later", other.Listener.Addr().String()))
	eventually("the new cluster routes", func() bool { st, b := get("later"); return st == 200 && b == "other upstream" })

	h.cds.set(t, mock, testCluster("later", third.Listener.Addr().String()))
	eventually("the changed address takes the next request", func() bool { _, b := get("later"); return b == "third upstream" })

	// An unemulated setting: that cluster is refused, the others apply.
	bad := testCluster("ring", other.Listener.Addr().String())
	bad.LbPolicy = clusterv3.Cluster_RING_HASH
	h.cds.set(t, mock, bad, testCluster("fresh", other.Listener.Addr().String()))
	select {
	case msg := <-h.cds.nacks:
		if !strings.Contains(msg, "ring") || !strings.Contains(msg, "lb_policy") {
			t.Errorf("NACK says %q", msg)
		}
	case <-time.After(testkit.Deadline):
		t.Fatal("no NACK for an unemulated cluster setting")
	}
	eventually("the valid cluster of a refused update applies", func() bool { _, b := get("fresh"); return b == "other upstream" })
	if st, _ := get("ring"); st != 503 {
		t.Errorf("refused cluster answered %d", st)
	}
	if st, _ := get("later"); st != 503 {
		t.Errorf("dropped cluster answered %d, want 503 cluster_not_found", st)
	}
}

// TestCDSReconnects: when the xDS server goes away the clusters keep serving; the
// front reconnects (with Envoy's back-off) and takes the restarted server's clusters.
func TestCDSReconnects(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up") }))
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	gs := grpc.NewServer()
	first := newCDSServer(gs)
	first.set(t, testCluster("a", up.Listener.Addr().String()))
	go func() { _ = gs.Serve(ln) }()

	b := loadBootstrap(t)
	b.ClusterAddress("extproc", addr)
	cfg, err := FromBootstrap(b.Parsed())
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WaitClusters()
	if f.clusters.get("a") == nil {
		t.Fatal("cluster a not served")
	}

	gs.Stop()
	time.Sleep(100 * time.Millisecond)
	if f.clusters.get("a") == nil {
		t.Fatal("the clusters went with the xDS server")
	}

	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	gs2 := grpc.NewServer()
	defer gs2.Stop()
	second := newCDSServer(gs2)
	second.set(t, testCluster("a", up.Listener.Addr().String()), testCluster("b", up.Listener.Addr().String()))
	go func() { _ = gs2.Serve(ln2) }()
	deadline := time.Now().Add(10 * time.Second)
	for f.clusters.get("b") == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if f.clusters.get("b") == nil {
		t.Fatal("no reconnection to the restarted xDS server")
	}
}
