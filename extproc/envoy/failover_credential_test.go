package envoy_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/internal/cloudauth"
)

// TestFailoverCredentialPerAttempt: a failover request gets a channel's credential only
// when Envoy attempts that channel. Routing it mints no token for a Vertex channel
// (Envoy skips one that cools, and a token endpoint that hangs would hold every request
// up to the credential timeout); the attempt that reaches the channel carries its token.
func TestFailoverCredentialPerAttempt(t *testing.T) {
	const email = "gw@demo-project.iam.gserviceaccount.com"
	var grants atomic.Int32
	issuer := &cloudauth.TokenIssuer{Email: email, TTL: time.Hour, Now: time.Now}
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		grants.Add(1)
		issuer.ServeHTTP(w, r)
	}))
	t.Cleanup(tokens.Close)
	sa, err := cloudauth.NewServiceAccount(email, tokens.URL+"/token")
	if err != nil {
		t.Fatal(err)
	}
	issuer.PublicKey = sa.PublicKey
	saFile := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(saFile, sa.JSON, 0o600); err != nil {
		t.Fatal(err)
	}
	doc := `
models:
  - {id: demo-failover, kind: chat, prices: {input_per_mtok: 1000000, output_per_mtok: 2000000}, max_output_tokens: 4096}
channels:
  - {name: fo-vertex, model: demo-failover, cluster: mock, format: vertex-gemini, upstream_model: gemini-2.5-flash, gcp: {project: demo-project, location: us-east5, credentials_file: ` + saFile + `}}
  - {name: fo-openai, model: demo-failover, cluster: mock, format: openai, upstream_model: mock-gpt, credential_env: DEMO_OPENAI_KEY, priority: 1}
clusters:
  - {name: mock, address: "127.0.0.1:18080"}
`
	s, cat, _, _, key := failoverStack(t, doc)
	m, _ := cat.Model("demo-failover")
	body := `{"model":"demo-failover","messages":[{"role":"user","content":"hello"}]}`
	const rid = "3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"

	d := s.h.Open(t)
	d.Send(replay.PostHeaders("/v1/chat/completions", len(body), "authorization", "Bearer "+key, "x-request-id", rid))
	br := d.Send(replay.RequestBody([]byte(body), true))
	if v, _ := header(br.GetRequestBody().GetResponse().GetHeaderMutation(), lifecycle.RoutingHeader); v != catalog.FailoverCluster(m, m.Candidates("default")) {
		t.Fatalf("not routed to the failover cluster: %v", br)
	}
	if n := grants.Load(); n != 0 {
		t.Fatalf("routing the request asked the token endpoint %d times, want 0", n)
	}

	// Envoy attempts the Vertex channel: its request carries a token minted now.
	a := s.h.OpenAttempt(t)
	r := a.Send(replay.AttemptHeaders(rid, "fo-vertex"))
	auth, _ := header(r.GetRequestHeaders().GetResponse().GetHeaderMutation(), "authorization")
	if !strings.HasPrefix(auth, "Bearer ") || !issuer.Valid(strings.TrimPrefix(auth, "Bearer ")) || grants.Load() != 1 {
		t.Fatalf("the Vertex attempt's authorization %q after %d grants, want the one token issued", auth, grants.Load())
	}
	a.Close()
	d.Close()
}
