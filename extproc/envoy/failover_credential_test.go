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
	"github.com/llmgw/gateway/extproc/health"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/internal/cloudauth"
)

// tokenEndpoint is a service account key file whose token endpoint issues tokens (or,
// refusing, refuses every grant as a revoked key's is), and the grants it was asked.
func tokenEndpoint(t *testing.T, refusing bool) (saFile string, issuer *cloudauth.TokenIssuer, grants *atomic.Int32) {
	t.Helper()
	const email = "gw@demo-project.iam.gserviceaccount.com"
	grants = new(atomic.Int32)
	issuer = &cloudauth.TokenIssuer{Email: email, TTL: time.Hour, Now: time.Now}
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		grants.Add(1)
		if refusing {
			w.Header().Set("content-type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`))
			return
		}
		issuer.ServeHTTP(w, r)
	}))
	t.Cleanup(tokens.Close)
	sa, err := cloudauth.NewServiceAccount(email, tokens.URL+"/token")
	if err != nil {
		t.Fatal(err)
	}
	issuer.PublicKey = sa.PublicKey
	saFile = filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(saFile, sa.JSON, 0o600); err != nil {
		t.Fatal(err)
	}
	return saFile, issuer, grants
}

// credentialFailoverCatalog: demo-failover on a Vertex channel (priority 0) with the key
// file saFile and an OpenAI channel (priority 1).
func credentialFailoverCatalog(saFile string) string {
	return `
models:
  - {id: demo-failover, kind: chat, prices: {input_per_mtok: 1000000, output_per_mtok: 2000000}, max_output_tokens: 4096}
channels:
  - {name: fo-vertex, model: demo-failover, cluster: mock, format: vertex-gemini, upstream_model: gemini-2.5-flash, gcp: {project: demo-project, location: us-east5, credentials_file: ` + saFile + `}}
  - {name: fo-openai, model: demo-failover, cluster: mock, format: openai, upstream_model: mock-gpt, credential_env: DEMO_OPENAI_KEY, priority: 1}
clusters:
  - {name: mock, address: "127.0.0.1:18080"}
`
}

// TestFailoverCredentialWhenRouted: a failover request gets the credential of each
// channel it may use when it is routed, before anything is held or sent: the attempt on
// the Vertex channel carries the token minted then (no second grant), and the next
// request uses the cached token.
func TestFailoverCredentialWhenRouted(t *testing.T) {
	saFile, issuer, grants := tokenEndpoint(t, false)
	s, cat, _, _, key := failoverStack(t, credentialFailoverCatalog(saFile))
	m, _ := cat.Model("demo-failover")
	body := `{"model":"demo-failover","messages":[{"role":"user","content":"hello"}]}`
	for i, rid := range []string{"3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f", "3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e60"} {
		d := s.h.Open(t)
		d.Send(replay.PostHeaders("/v1/chat/completions", len(body), "authorization", "Bearer "+key, "x-request-id", rid))
		br := d.Send(replay.RequestBody([]byte(body), true))
		if v, _ := header(br.GetRequestBody().GetResponse().GetHeaderMutation(), lifecycle.RoutingHeader); v != catalog.FailoverCluster(m, m.Candidates("default")) {
			t.Fatalf("request %d not routed to the failover cluster: %v", i, br)
		}
		a := s.h.OpenAttempt(t)
		r := a.Send(replay.AttemptHeaders(rid, "fo-vertex"))
		auth, _ := header(r.GetRequestHeaders().GetResponse().GetHeaderMutation(), "authorization")
		if !strings.HasPrefix(auth, "Bearer ") || !issuer.Valid(strings.TrimPrefix(auth, "Bearer ")) || grants.Load() != 1 {
			t.Fatalf("request %d: the Vertex attempt's authorization %q after %d grants, want the one token issued", i, auth, grants.Load())
		}
		a.Close()
		d.Cancel()
	}
}

// TestFailoverSkipsChannelWithoutCredential: a Vertex channel whose token endpoint
// refuses the grant is not eligible. Routing finds it out before the hold and cools the
// channel; the request fails over to the next channel, is answered there and charged
// once. An attempt Envoy still makes on the cooled channel (its view a moment older) is
// refused with nothing sent: the client gets 503 service_unavailable and nothing is
// charged. With no channel holding a credential, the request is refused before its hold.
func TestFailoverSkipsChannelWithoutCredential(t *testing.T) {
	saFile, _, grants := tokenEndpoint(t, true)
	s, cat, tracker, acct, key := failoverStack(t, credentialFailoverCatalog(saFile))
	m, _ := cat.Model("demo-failover")
	body := `{"model":"demo-failover","messages":[{"role":"user","content":"hello"}]}`

	const rid = "7d1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
	d := s.h.Open(t)
	d.Send(replay.PostHeaders("/v1/chat/completions", len(body), "authorization", "Bearer "+key, "x-request-id", rid))
	br := d.Send(replay.RequestBody([]byte(body), true))
	if v, _ := header(br.GetRequestBody().GetResponse().GetHeaderMutation(), lifecycle.RoutingHeader); v != catalog.FailoverCluster(m, m.Candidates("default")) {
		t.Fatalf("not routed to the failover cluster: %v", br)
	}
	if st, why := tracker.State("fo-vertex"); st != health.Cooling || why != health.Credential || grants.Load() != 1 {
		t.Fatalf("fo-vertex is %v (%v) after %d grants, want cooling for its credential after 1", st, why, grants.Load())
	}
	// Envoy, told the channel cools, attempts the next one: its key, and the answer.
	a := s.h.OpenAttempt(t)
	r := a.Send(replay.AttemptHeaders(rid, "fo-openai"))
	if auth, _ := header(r.GetRequestHeaders().GetResponse().GetHeaderMutation(), "authorization"); auth != "Bearer sk-mock-openai" {
		t.Fatalf("the OpenAI attempt's authorization %q", auth)
	}
	a.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
	a.Close()
	d.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
	d.Send(replay.ResponseBody([]byte(`{"id":"x","object":"chat.completion","model":"mock-gpt","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`), true))
	d.Close()
	s.h.WaitSettled(t)
	balance, reserved := s.balance(t, acct)
	if want := int64(1_000_000 - (12*1 + 5*2)); balance != want || reserved != 0 {
		t.Fatalf("balance %d reserved %d, want %d and 0: one charge, the answer's", balance, reserved, want)
	}

	// An attempt on the cooled channel from Envoy's older view: refused, nothing sent.
	tracker.Succeeded("fo-vertex") // usable again: routing asks its token endpoint once more
	const rid2 = "7d1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e60"
	d = s.h.Open(t)
	d.Send(replay.PostHeaders("/v1/chat/completions", len(body), "authorization", "Bearer "+key, "x-request-id", rid2))
	d.Send(replay.RequestBody([]byte(body), true))
	a = s.h.OpenAttempt(t)
	r = a.Send(replay.AttemptHeaders(rid2, "fo-vertex"))
	if r.GetImmediateResponse() == nil {
		t.Fatalf("an attempt on a channel without its credential went on: %v", r)
	}
	a.Close()
	d.Send(replay.ResponseHeaders(502, "content-type", "text/plain"))
	out := d.Send(replay.ResponseBody([]byte("local reply"), true))
	if im := out.GetImmediateResponse(); im == nil || im.GetStatus().GetCode() != 503 || !strings.Contains(string(im.GetBody()), `"code":"service_unavailable"`) {
		t.Fatalf("answer after the refused attempt: %v, want 503 service_unavailable", out)
	}
	d.Close()
	s.h.WaitSettled(t)
	if b, reserved := s.balance(t, acct); b != balance || reserved != 0 {
		t.Fatalf("balance %d reserved %d after a request nothing answered, want %d and 0", b, reserved, balance)
	}

	// No channel with a credential: refused before the hold.
	s2, _, _, acct2, key2 := failoverStack(t, strings.Replace(credentialFailoverCatalog(saFile),
		"format: openai, upstream_model: mock-gpt, credential_env: DEMO_OPENAI_KEY", "format: vertex-gemini, upstream_model: g, gcp: {project: demo-project, location: us-east5, credentials_file: "+saFile+"}", 1))
	d = s2.h.Open(t)
	d.Send(replay.PostHeaders("/v1/chat/completions", len(body), "authorization", "Bearer "+key2, "x-request-id", rid))
	br = d.Send(replay.RequestBody([]byte(body), true))
	if im := br.GetImmediateResponse(); im == nil || im.GetStatus().GetCode() != 503 || !strings.Contains(string(im.GetBody()), `"code":"service_unavailable"`) {
		t.Fatalf("no channel with a credential: %v, want 503 service_unavailable", br)
	}
	d.Close()
	if b, reserved := s2.balance(t, acct2); b != 1_000_000 || reserved != 0 {
		t.Fatalf("balance %d reserved %d, want nothing held", b, reserved)
	}
}
