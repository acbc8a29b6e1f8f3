package front

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestTransportSocketMatches: in one cluster, an endpoint whose
// envoy.transport_socket_match metadata matches a transport_socket_matches entry is
// reached over that entry's TLS (trusted_ca, SAN check), one matching none over the
// cluster's transport_socket (none here: plaintext). Priority 0 (plaintext) answers a
// retriable 503, so the retry reaches priority 1 (TLS).
func TestTransportSocketMatches(t *testing.T) {
	tlsUp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "over tls to "+r.URL.Path)
	}))
	defer tlsUp.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsUp.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	log := &attemptLog{}
	cl := endpointsCluster("model",
		ep{addr: answering(t, log, "plain", 503, "busy"), priority: 0},
		ep{addr: tlsUp.Listener.Addr().String(), priority: 1},
	)
	cl.TransportSocketMatches = []*clusterv3.Cluster_TransportSocketMatch{
		socketMatch(t, "other", map[string]any{"cluster": "other"}, ca, "nothing.example"),
		socketMatch(t, "tls-up", map[string]any{"cluster": "tls-up"}, ca, "example.com"),
	}
	md, _ := structpb.NewStruct(map[string]any{"cluster": "tls-up", "unrelated": "label"})
	cl.LoadAssignment.Endpoints[1].LbEndpoints[0].Metadata.FilterMetadata[socketMatchNamespace] = md
	h := newHarnessClusters(t, nil, routingProc("model", setHeader("x-envoy-max-retries", "1")), withRetryPolicy(failoverRetryPolicy(t)), cl)
	status, _, got := h.do(t, http.MethodGet, "/v1/models", nil, nil)
	if status != 200 || string(got) != "over tls to /v1/models" {
		t.Fatalf("client got %d %q, want priority 1's answer over TLS", status, got)
	}
	if names, _, _ := log.get(); strings.Join(names, ",") != "plain" {
		t.Errorf("plaintext endpoint attempts %v, want one", names)
	}

	// A match whose SAN check fails: the TLS endpoint cannot be reached.
	cl.TransportSocketMatches[1] = socketMatch(t, "tls-up", map[string]any{"cluster": "tls-up"}, ca, "other.example")
	h2 := newHarnessClusters(t, nil, routingProc("model", setHeader("x-envoy-max-retries", "1")), withRetryPolicy(failoverRetryPolicy(t)), cl)
	if status, _, got := h2.do(t, http.MethodGet, "/v1/models", nil, nil); status == 200 {
		t.Errorf("reached the TLS endpoint despite a failing SAN check: %s", got)
	}
}

func socketMatch(t *testing.T, name string, match map[string]any, ca, san string) *clusterv3.Cluster_TransportSocketMatch {
	t.Helper()
	m, err := structpb.NewStruct(match)
	if err != nil {
		t.Fatal(err)
	}
	return &clusterv3.Cluster_TransportSocketMatch{Name: name, Match: m, TransportSocket: tlsSocket(t, ca, san)}
}

// tlsSocket is a TLS transport socket as extproc/xds builds one: SNI example.com (the
// test servers' certificate), certificates checked against ca, SAN san.
func tlsSocket(t *testing.T, ca, san string) *corev3.TransportSocket {
	t.Helper()
	tc, err := anypb.New(&tlsv3.UpstreamTlsContext{
		Sni: "example.com",
		CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
			ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: ca}},
				MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{SanType: tlsv3.SubjectAltNameMatcher_DNS,
					Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: san}}}},
			}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tc}}
}

// TestLabelsMatch pins metadataLabelMatch: every label present and equal; an empty
// match matches any host, metadata or not.
func TestLabelsMatch(t *testing.T) {
	md, _ := structpb.NewStruct(map[string]any{"cluster": "a", "zone": "z"})
	label := func(m map[string]any) map[string]*structpb.Value {
		s, _ := structpb.NewStruct(m)
		return s.GetFields()
	}
	for _, c := range []struct {
		labels map[string]*structpb.Value
		md     *structpb.Struct
		want   bool
	}{
		{label(map[string]any{"cluster": "a"}), md, true},
		{label(map[string]any{"cluster": "a", "zone": "z"}), md, true},
		{label(map[string]any{"cluster": "b"}), md, false},
		{label(map[string]any{"cluster": "a", "missing": "x"}), md, false},
		{label(map[string]any{"cluster": "a"}), nil, false},
		{nil, nil, true},
	} {
		if got := labelsMatch(c.labels, c.md); got != c.want {
			t.Errorf("labelsMatch(%v, %v) = %v", c.labels, c.md, got)
		}
	}
}
