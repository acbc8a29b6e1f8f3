package xds

import (
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/zap"

	"github.com/llmgw/gateway/extproc/catalog"
)

const failoverDoc = `
models:
  - {id: fo, kind: chat, prices: {input_per_mtok: 1, output_per_mtok: 2}, max_output_tokens: 10}
  - {id: emb, kind: embeddings, prices: {input_per_mtok: 1}}
channels:
  - {name: first, model: fo, cluster: mock, format: openai, upstream_model: m, credential_env: K}
  - {name: dead, model: fo, cluster: nowhere, format: openai, upstream_model: m, credential_env: K, priority: 1}
  - {name: claude, model: fo, cluster: anthropic, format: anthropic, upstream_model: c, credential_env: K, priority: 2}
  - {name: last, model: fo, cluster: mock, format: openai, upstream_model: m, credential_env: K, priority: 3, weight: 3}
  - {name: vip, model: fo, cluster: mock, format: openai, upstream_model: m, credential_env: K, priority: 3, tiers: [enterprise]}
  - {name: e, model: emb, cluster: mock, format: openai, upstream_model: m, credential_env: K}
clusters:
  - {name: mock, address: "127.0.0.1:18080", connect_timeout: 1s}
  - {name: nowhere, address: "127.0.0.1:1", connect_timeout: 1s}
  - {name: anthropic, address: "api.anthropic.com:443", tls: true}
`

func TestFailoverClusters(t *testing.T) {
	cat := parse(t, []byte(failoverDoc))
	cooling := "dead"
	cls, err := FailoverClusters(cat, func(ch string) bool { return ch != cooling }, "extproc")
	if err != nil {
		t.Fatal(err)
	}
	// Two candidate sets of fo (enterprise sees vip too); none for the embeddings model.
	if len(cls) != 2 {
		t.Fatalf("%d clusters, want 2", len(cls))
	}
	m, _ := cat.Model("fo")
	for _, tier := range []string{"free", "enterprise"} {
		name := catalog.FailoverCluster(m, m.Candidates(tier))
		i := slices.IndexFunc(cls, func(c *clusterv3.Cluster) bool { return c.GetName() == name })
		if i < 0 || !strings.HasPrefix(name, catalog.FailoverClusterPrefix+"fo/") {
			t.Fatalf("tier %s: no cluster %q", tier, name)
		}
	}
	free := cls[slices.IndexFunc(cls, func(c *clusterv3.Cluster) bool {
		return c.GetName() == catalog.FailoverCluster(m, m.Candidates("free"))
	})]
	// Every request failing over at once may have its retry in flight (not Envoy's
	// default of three for the whole cluster).
	if th := free.GetCircuitBreakers().GetThresholds(); len(th) != 1 || th[0].GetMaxRetries().GetValue() != th[0].GetMaxRequests().GetValue() {
		t.Errorf("circuit breakers %v: max_retries must match max_requests", th)
	}
	if free.GetType() != clusterv3.Cluster_STRICT_DNS || free.GetConnectTimeout().AsDuration().Seconds() != 5 {
		t.Errorf("type %v timeout %v: a DNS upstream needs STRICT_DNS, the longest connect timeout wins", free.GetType(), free.GetConnectTimeout())
	}
	// One priority per catalog priority, in order; the channel in each endpoint's metadata.
	type ep struct {
		prio    uint32
		channel string
		healthy bool
		weight  uint32
		tls     bool
	}
	var got []ep
	for _, loc := range free.GetLoadAssignment().GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			md := lb.GetMetadata().GetFilterMetadata()
			got = append(got, ep{loc.GetPriority(), md[MetadataNamespace].GetFields()[ChannelKey].GetStringValue(),
				lb.GetHealthStatus() == corev3.HealthStatus_HEALTHY, lb.GetLoadBalancingWeight().GetValue(), md[socketMatchKey] != nil})
		}
	}
	want := []ep{{0, "first", true, 1, false}, {1, "dead", false, 1, false}, {2, "claude", true, 1, true}, {3, "last", true, 3, false}}
	if !slices.Equal(got, want) {
		t.Errorf("endpoints\n got %+v\nwant %+v", got, want)
	}
	if tsm := free.GetTransportSocketMatches(); len(tsm) != 1 || tsm[0].GetMatch().GetFields()["cluster"].GetStringValue() != "anthropic" {
		t.Errorf("transport_socket_matches = %v", tsm)
	}
	// The attempt filter: ext_proc then the codec, marked as an attempt's stream.
	var po httpv3.HttpProtocolOptions
	if err := free.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(&po); err != nil {
		t.Fatal(err)
	}
	fs := po.GetHttpFilters()
	if len(fs) != 2 || fs[0].GetName() != "envoy.filters.http.ext_proc" || fs[1].GetName() != "envoy.filters.http.upstream_codec" {
		t.Fatalf("upstream filters = %v", fs)
	}
	var ext extprocv3.ExternalProcessor
	if err := fs[0].GetTypedConfig().UnmarshalTo(&ext); err != nil {
		t.Fatal(err)
	}
	md := ext.GetGrpcService().GetInitialMetadata()
	if ext.GetGrpcService().GetEnvoyGrpc().GetClusterName() != "extproc" || len(md) != 1 || md[0].GetKey() != AttemptHeader ||
		!slices.Equal(ext.GetRequestAttributes(), []string{AttemptAttribute}) || !ext.GetAllowModeOverride() {
		t.Errorf("attempt ext_proc = %v", &ext)
	}
	if err := po.ValidateAll(); err != nil {
		t.Error(err)
	}
	if err := ext.ValidateAll(); err != nil {
		t.Error(err)
	}

	// The name follows the channel set, not the tier.
	if a, b := catalog.FailoverCluster(m, m.Candidates("free")), catalog.FailoverCluster(m, m.Candidates("pro")); a != b {
		t.Errorf("two tiers that see the same channels got %s and %s", a, b)
	}
}

func TestFailoverClusterPrefixIsReserved(t *testing.T) {
	doc := strings.Replace(failoverDoc, "name: nowhere,", "name: failover/x,", 1)
	doc = strings.Replace(doc, "cluster: nowhere,", "cluster: failover/x,", 1)
	if _, err := catalog.Parse([]byte(doc), anyEnv, anyFile); err == nil || !strings.Contains(err.Error(), "the gateway's own") {
		t.Fatalf("err = %v", err)
	}
}

func TestServerServesFailoverHealth(t *testing.T) {
	cat := parse(t, []byte(failoverDoc))
	down := map[string]bool{}
	s := New(zap.NewNop(), Options{Failover: true, Healthy: func(ch string) bool { return !down[ch] }, ExtprocCluster: "extproc"})
	if err := s.Update(cat, "v1"); err != nil {
		t.Fatal(err)
	}
	served := func() (string, []*clusterv3.Cluster) {
		snap, err := s.cache.GetSnapshot("gateway")
		if err != nil {
			t.Fatal(err)
		}
		var cls []*clusterv3.Cluster
		for _, r := range snap.GetResources(resourcev3.ClusterType) {
			cls = append(cls, r.(*clusterv3.Cluster))
		}
		return snap.GetVersion(resourcev3.ClusterType), cls
	}
	v, cls := served()
	if v != "v1" || len(cls) != 3+2 {
		t.Fatalf("version %s, %d clusters, want v1 and the catalog's 3 + 2 failover clusters", v, len(cls))
	}
	if err := s.Refresh(); err != nil {
		t.Fatal(err)
	}
	if v2, _ := served(); v2 != v {
		t.Errorf("an unchanged health made a new version %s", v2)
	}
	down["claude"] = true
	if err := s.Refresh(); err != nil {
		t.Fatal(err)
	}
	v3, cls := served()
	if v3 == v || !strings.HasPrefix(v3, "v1-") {
		t.Fatalf("a channel going down made version %s", v3)
	}
	for _, c := range cls {
		for _, loc := range c.GetLoadAssignment().GetEndpoints() {
			for _, lb := range loc.GetLbEndpoints() {
				if lb.GetMetadata().GetFilterMetadata()[MetadataNamespace].GetFields()[ChannelKey].GetStringValue() == "claude" &&
					lb.GetHealthStatus() != corev3.HealthStatus_UNHEALTHY {
					t.Errorf("%s: claude is %v", c.GetName(), lb.GetHealthStatus())
				}
			}
		}
	}
}
