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
	edit := func(y string) string {
		// Point the openai cluster at the TLS test server (its certificate names example.com).
		y = strings.Replace(y, "address: api.openai.com\n                      port_value: 443",
			"address: 127.0.0.1\n                      port_value: "+port(tlsUp.Listener.Addr().String()), 1)
		y = strings.Replace(y, "sni: api.openai.com", "sni: example.com", 1)
		y = strings.Replace(y, "exact: api.openai.com", "exact: example.com", 1)
		return strings.Replace(y, "filename: /etc/ssl/certs/ca-certificates.crt", "filename: "+ca, 1)
	}
	h := newHarness(t, nil, func(s *session) error {
		s.next()
		if err := s.send(routeTo("openai")); err != nil {
			return err
		}
		s.next()
		return s.send(respHeadersReply(nil))
	}, edit)
	status, _, b := h.do(t, http.MethodGet, "/v1/models", nil, nil)
	// auto_host_rewrite: the upstream sees its own host, not the gateway's.
	if status != 200 || string(b) != "over tls, host 127.0.0.1" {
		t.Errorf("got %d %s", status, b)
	}

	// A wrong SAN fails verification: an upstream connection failure.
	h2 := newHarness(t, nil, func(s *session) error {
		s.next()
		if err := s.send(routeTo("openai")); err != nil {
			return err
		}
		s.next()
		return s.send(respHeadersReply(nil))
	}, func(y string) string {
		return strings.Replace(edit(y), "exact: example.com", "exact: other.example", 1)
	})
	if _, err := FromBootstrap(mustParse(t, edit(mustRead(t)))); err != nil {
		t.Fatal(err)
	}
	status, _, b = h2.do(t, http.MethodGet, "/v1/models", nil, nil)
	if status != 502 || !strings.Contains(string(b), "upstream_error") {
		t.Errorf("TLS verification did not fail: %s", b)
	}
}
