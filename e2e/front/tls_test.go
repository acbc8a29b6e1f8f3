package front

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
)

// TestTLSCluster proxies to a TLS cluster: SNI, the CA bundle from trusted_ca and the
// SAN check, as the openai/anthropic clusters of envoy.yaml are configured.
func TestTLSCluster(t *testing.T) {
	tlsUp := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("over tls, host " + r.Host))
	}))
	tlsUp.Config.ErrorLog = log.New(io.Discard, "", 0) // the failing handshake below is expected
	tlsUp.StartTLS()
	defer tlsUp.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsUp.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	// The openai cluster as the production catalog's clusters are built (extproc/xds),
	// on the TLS test server (its certificate names example.com).
	openai := func(san string) *clusterv3.Cluster {
		c := testCluster("openai", tlsUp.Listener.Addr().String())
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS}
		c.TransportSocket = tlsSocket(t, ca, san)
		return c
	}
	h := newHarnessClusters(t, nil, func(s *session) error {
		s.next()
		if err := s.send(routeTo("openai")); err != nil {
			return err
		}
		s.next()
		return s.send(respHeadersReply(nil))
	}, nil, openai("example.com"))
	status, _, b := h.do(t, http.MethodGet, "/v1/models", nil, nil)
	// auto_host_rewrite: the upstream sees its own host, not the gateway's.
	if status != 200 || string(b) != "over tls, host 127.0.0.1" {
		t.Errorf("got %d %s", status, b)
	}

	// A wrong SAN fails verification: an upstream connection failure.
	h2 := newHarnessClusters(t, nil, func(s *session) error {
		s.next()
		if err := s.send(routeTo("openai")); err != nil {
			return err
		}
		s.next()
		return s.send(respHeadersReply(nil))
	}, nil, openai("other.example"))
	status, _, b = h2.do(t, http.MethodGet, "/v1/models", nil, nil)
	if status != 502 || !strings.Contains(string(b), "upstream_error") {
		t.Errorf("TLS verification did not fail: %s", b)
	}
}
