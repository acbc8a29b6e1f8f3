package xds

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/internal/demoenv"
)

func repoFile(t *testing.T, rel string) []byte {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// anyEnv resolves the demo catalog's variables as the local stack sets them, any other
// to a key.
func anyEnv(name string) (string, bool) {
	if v, ok := demoenv.Lookup(name); ok {
		return v, true
	}
	return "sk-test", true
}

func anyFile(string) ([]byte, error) { return []byte("sk-test"), nil }

func parse(t *testing.T, doc []byte) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Parse(doc, anyEnv, anyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClustersOfTheShippedCatalogs(t *testing.T) {
	demo, err := Clusters(parse(t, repoFile(t, "deploy/local/catalog.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*clusterv3.Cluster{}
	for _, c := range demo {
		byName[c.GetName()] = c
	}
	mock := byName["mock-providers"]
	if mock == nil || mock.GetType() != clusterv3.Cluster_STATIC || mock.GetConnectTimeout().AsDuration() != time.Second {
		t.Fatalf("mock-providers = %v", mock)
	}
	sa := mock.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if sa.GetAddress() != "127.0.0.1" || sa.GetPortValue() != 18080 {
		t.Errorf("mock-providers endpoint = %v", sa)
	}
	if got := mock.GetCircuitBreakers().GetThresholds()[0].GetMaxRequests().GetValue(); got != catalog.DefaultMaxRequests {
		t.Errorf("max_requests = %d", got)
	}
	if byName["unreachable"] == nil {
		t.Error("no unreachable cluster")
	}

	prod, err := Clusters(parse(t, repoFile(t, "deploy/overlays/production/catalog.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range prod {
		if c.GetType() != clusterv3.Cluster_LOGICAL_DNS || c.GetDnsLookupFamily() != clusterv3.Cluster_V4_PREFERRED {
			t.Errorf("%s: type %v family %v", c.GetName(), c.GetType(), c.GetDnsLookupFamily())
		}
		var tc tlsv3.UpstreamTlsContext
		if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(&tc); err != nil {
			t.Fatalf("%s: %v", c.GetName(), err)
		}
		host := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
		vc := tc.GetCommonTlsContext().GetValidationContext()
		if tc.GetSni() != host || vc.GetMatchTypedSubjectAltNames()[0].GetMatcher().GetExact() != host ||
			vc.GetTrustedCa().GetFilename() != catalog.DefaultCAFile {
			t.Errorf("%s: TLS %v", c.GetName(), &tc)
		}
	}
}

// adsClient is one Envoy's ADS stream asking for every cluster.
type adsClient struct {
	t      *testing.T
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
}

func dialADS(t *testing.T, addr string) *adsClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &adsClient{t: t, stream: st}
	c.send("", "", nil)
	return c
}

func (c *adsClient) send(version, nonce string, nack *status.Status) {
	c.t.Helper()
	err := c.stream.Send(&discoveryv3.DiscoveryRequest{
		Node: &corev3.Node{Id: "front-" + c.t.Name(), Cluster: "gateway-front"}, TypeUrl: resourcev3.ClusterType,
		VersionInfo: version, ResponseNonce: nonce, ErrorDetail: nack,
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// next receives one response and ACKs it, returning its version and cluster names.
func (c *adsClient) next() (string, []string, error) {
	resp, err := c.stream.Recv()
	if err != nil {
		return "", nil, err
	}
	var names []string
	for _, r := range resp.GetResources() {
		var cl clusterv3.Cluster
		if err := r.UnmarshalTo(&cl); err != nil {
			c.t.Fatal(err)
		}
		names = append(names, cl.GetName())
	}
	c.send(resp.GetVersionInfo(), resp.GetNonce(), nil)
	return resp.GetVersionInfo(), names, nil
}

func serve(t *testing.T, s *Server, ln net.Listener) func() {
	gs := grpc.NewServer()
	s.Register(gs)
	go func() { _ = gs.Serve(ln) }()
	return func() { s.Stop(); gs.Stop() }
}

func withCluster(t *testing.T, base []byte, name, addr string) ([]byte, *catalog.Catalog) {
	doc := strings.Replace(string(base), "clusters:\n", "clusters:\n  - {name: "+name+", address: \""+addr+"\"}\n", 1)
	return []byte(doc), parse(t, []byte(doc))
}

func TestServerPushesEachCatalogAndSurvivesRestarts(t *testing.T) {
	base := repoFile(t, "deploy/local/catalog.yaml")
	cat := parse(t, base)
	s := New(zap.NewNop())
	if err := s.Update(cat, catalog.Version(base)); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	stop := serve(t, s, ln)

	a := dialADS(t, addr)
	v, names, err := a.next()
	if err != nil {
		t.Fatal(err)
	}
	if v != catalog.Version(base) || !slices.Contains(names, "mock-providers") || !slices.Contains(names, "unreachable") {
		t.Fatalf("first response: version %s clusters %v", v, names)
	}

	// A catalog with a new cluster is pushed to the open stream.
	doc2, cat2 := withCluster(t, base, "new-upstream", "127.0.0.1:18099")
	if err := s.Update(cat2, catalog.Version(doc2)); err != nil {
		t.Fatal(err)
	}
	v, names, err = a.next()
	if err != nil || v != catalog.Version(doc2) || !slices.Contains(names, "new-upstream") {
		t.Fatalf("pushed: version %s clusters %v err %v", v, names, err)
	}

	// A second Envoy connecting now gets the current snapshot at once.
	b := dialADS(t, addr)
	if v, names, err := b.next(); err != nil || v != catalog.Version(doc2) || !slices.Contains(names, "new-upstream") {
		t.Fatalf("late client: version %s clusters %v err %v", v, names, err)
	}

	// Stop ends the open streams; a restarted server (same catalog, as another replica
	// would serve it) gives a reconnecting client the same version.
	stop()
	if _, _, err := a.next(); err == nil {
		t.Fatal("stream still open after Stop")
	}
	s2 := New(zap.NewNop())
	if err := s2.Update(cat2, catalog.Version(doc2)); err != nil {
		t.Fatal(err)
	}
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(serve(t, s2, ln2))
	c := dialADS(t, addr)
	if v, names, err := c.next(); err != nil || v != catalog.Version(doc2) || len(names) != len(cat2.Clusters()) {
		t.Fatalf("after restart: version %s clusters %v err %v", v, names, err)
	}
}

func TestServerKeepsServingAfterANack(t *testing.T) {
	base := repoFile(t, "deploy/local/catalog.yaml")
	s := New(zap.NewNop())
	if err := s.Update(parse(t, base), "v1"); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(serve(t, s, ln))
	a := dialADS(t, ln.Addr().String())
	resp, err := a.stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	// The client refuses v1 (as Envoy does for a cluster it cannot build).
	a.send("", resp.GetNonce(), &status.Status{Code: 3, Message: "cluster mock-providers: refused"})
	doc2, cat2 := withCluster(t, base, "later", "127.0.0.1:18098")
	if err := s.Update(cat2, catalog.Version(doc2)); err != nil {
		t.Fatal(err)
	}
	// The server may send v1 again first (the NACK named no accepted version); then v2.
	for range 3 {
		v, names, err := a.next()
		if err != nil {
			t.Fatal(err)
		}
		if v == catalog.Version(doc2) {
			if !slices.Contains(names, "later") {
				t.Fatalf("after a NACK: clusters %v", names)
			}
			return
		}
	}
	t.Fatal("the update after a NACK never came")
}

func TestSnapshotIsConsistentAndVersioned(t *testing.T) {
	base := repoFile(t, "deploy/local/catalog.yaml")
	snap, err := Snapshot(parse(t, base), "abc")
	if err != nil {
		t.Fatal(err)
	}
	if snap.GetVersion(resourcev3.ClusterType) != "abc" {
		t.Errorf("version %q", snap.GetVersion(resourcev3.ClusterType))
	}
	if n := len(snap.GetResources(resourcev3.ClusterType)); n != 2 {
		t.Errorf("%d clusters, want 2", n)
	}
}
