package lifecycle_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/extproc/health"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/internal/cloudauth"
)

// credCatalog has one chat model per credential style: a Bedrock channel behind a DNS
// cluster (the host Envoy sends is the cluster's) and an Azure-style key channel behind
// an IP cluster (the client's host is kept).
const credCatalog = `
models:
  - {id: m-aws, kind: chat, max_output_tokens: 100, prices: {input_per_mtok: 1, output_per_mtok: 1}}
  - {id: m-azure, kind: chat, max_output_tokens: 100, prices: {input_per_mtok: 1, output_per_mtok: 1}}
clusters:
  - {name: bedrock, address: "bedrock-runtime.us-east-1.amazonaws.com:443", tls: true}
  - {name: azure, address: "127.0.0.1:9"}
channels:
  - {name: aws, model: m-aws, cluster: bedrock, format: bedrock, upstream_model: "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-v2:1",
     aws: {region: us-east-1, access_key_id_env: AKID, secret_access_key_env: SECRET}}
  - {name: az, model: m-azure, cluster: azure, format: openai, upstream_model: gpt, credential_env: AZ, credential_header: api-key}
`

var credEnv = map[string]string{"AKID": "AKIDEXAMPLE", "SECRET": "aws-secret", "AZ": "azure-key"}

func credService(t *testing.T) *lifecycle.Service {
	t.Helper()
	cat, err := catalog.Parse([]byte(credCatalog), func(k string) (string, bool) { v, ok := credEnv[k]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &replay.FakeLedger{}
	f.AddKey(secKey, ledger.Grant{KeyID: "k-sec", AccountID: "a-sec", Tier: "default", AccountToppedUp: true})
	return replay.Service(t, f, func(c *lifecycle.Config) { c.Catalog = cat })
}

// sent is the upstream request the body reply makes of the client's: its headers after
// the reply's removals and sets (removals first, as Envoy applies them).
func sent(client []lifecycle.Header, a lifecycle.Action) map[string]string {
	h := map[string]string{}
	for _, x := range client {
		if !slices.Contains(a.RemoveHeaders, x.Name) {
			h[x.Name] = x.Value
		}
	}
	for _, x := range a.SetHeaders {
		h[x.Name] = x.Value
	}
	return h
}

// TestChannelCredentialOverFinalBytes: the channel's credential is computed over the
// body and path as sent, for the host the upstream receives, and no client credential
// header survives.
func TestChannelCredentialOverFinalBytes(t *testing.T) {
	svc := credService(t)
	ctx := context.Background()
	forged := []lifecycle.Header{{"x-api-key", secKey}, {"api-key", "client-made"}, {"x-goog-api-key", "client-made"}, {"x-amz-security-token", "client-made"}}

	t.Run("aws sigv4", func(t *testing.T) {
		r := svc.NewRequest()
		client := secHeaders("/v1/chat/completions", forged...)
		if h := r.RequestHeaders(ctx, client, false); h.Immediate != nil {
			t.Fatalf("refused: %s", h.Immediate.Body)
		}
		b := r.RequestBody(ctx, []byte(`{"model":"m-aws","messages":[{"role":"user","content":"hi"}]}`), true)
		if b.Immediate != nil {
			t.Fatalf("refused: %s", b.Immediate.Body)
		}
		defer r.End(ctx, "done")
		h := sent(client, b)
		// The model id escaped as the AWS SDK escapes its modelId label: ':' and '/' too.
		if want := "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-v2%3A1/converse"; h[":path"] != want {
			t.Fatalf(":path %s, want %s", h[":path"], want)
		}
		if h["x-amz-security-token"] != "" || h["api-key"] != "" || h["x-goog-api-key"] != "" || h["x-api-key"] != "" {
			t.Fatalf("a client header went upstream: %v", h)
		}
		// The upstream's view: the path and body as replaced, the host Envoy writes for a
		// DNS cluster.
		up := httptest.NewRequest(h[":method"], h[":path"], strings.NewReader(string(b.Body)))
		up.Host = "bedrock-runtime.us-east-1.amazonaws.com"
		for k, v := range h {
			if !strings.HasPrefix(k, ":") {
				up.Header.Set(k, v)
			}
		}
		key := cloudauth.AWSKey{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "aws-secret"}
		if err := cloudauth.VerifySigV4(up, b.Body, key, credential.AWSService, "us-east-1", time.Now()); err != nil {
			t.Fatalf("the signature does not verify over the bytes sent: %v", err)
		}
	})

	t.Run("azure api-key", func(t *testing.T) {
		r := svc.NewRequest()
		client := secHeaders("/v1/chat/completions", forged...)
		r.RequestHeaders(ctx, client, false)
		b := r.RequestBody(ctx, []byte(`{"model":"m-azure","messages":[{"role":"user","content":"hi"}]}`), true)
		if b.Immediate != nil {
			t.Fatalf("refused: %s", b.Immediate.Body)
		}
		defer r.End(ctx, "done")
		h := sent(client, b)
		if h["api-key"] != "azure-key" || h["authorization"] != "" || h["x-api-key"] != "" || h["x-goog-api-key"] != "" {
			t.Fatalf("upstream headers %v", h)
		}
	})
}

// TestChannelWithoutCredentialIsSkipped: a channel whose token endpoint refuses its grant
// is not eligible: the request goes to the next channel with nothing sent to the first,
// which cools (health.Credential); with no channel left the client gets 503
// service_unavailable before anything is held.
func TestChannelWithoutCredentialIsSkipped(t *testing.T) {
	var grants atomic.Int32
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		grants.Add(1)
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`))
	}))
	t.Cleanup(refusing.Close)
	sa, err := cloudauth.NewServiceAccount("gw@demo-project.iam.gserviceaccount.com", refusing.URL+"/token")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SA": string(sa.JSON), "KEY": "sk-static"}
	cat, err := catalog.Parse([]byte(`
models:
  - {id: m-two, kind: chat, max_output_tokens: 100, prices: {input_per_mtok: 1, output_per_mtok: 1}}
  - {id: m-vertex, kind: chat, max_output_tokens: 100, prices: {input_per_mtok: 1, output_per_mtok: 1}}
clusters:
  - {name: vertex, address: "127.0.0.1:9"}
  - {name: openai, address: "127.0.0.1:10"}
channels:
  - {name: two-vertex, model: m-two, cluster: vertex, format: vertex-gemini, upstream_model: g, priority: 0,
     gcp: {project: p, location: us-east5, credentials_env: SA}}
  - {name: two-openai, model: m-two, cluster: openai, format: openai, upstream_model: gpt, credential_env: KEY, priority: 1}
  - {name: lone-vertex, model: m-vertex, cluster: vertex, format: vertex-gemini, upstream_model: g,
     gcp: {project: p, location: us-east5, credentials_env: SA}}
`), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &replay.FakeLedger{}
	f.AddKey(secKey, ledger.Grant{KeyID: "k-sec", AccountID: "a-sec", Tier: "default", AccountToppedUp: true})
	now := time.Unix(1_700_000_000, 0)
	tracker := health.New(health.Config{Now: func() time.Time { return now }})
	svc := replay.Service(t, f, func(c *lifecycle.Config) { c.Catalog, c.Health = cat, tracker })
	ctx := context.Background()
	send := func(model string) lifecycle.Action {
		r := svc.NewRequest()
		t.Cleanup(func() { r.End(ctx, "done") })
		if h := r.RequestHeaders(ctx, secHeaders("/v1/chat/completions"), false); h.Immediate != nil {
			t.Fatalf("refused: %s", h.Immediate.Body)
		}
		return r.RequestBody(ctx, []byte(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`), true)
	}

	b := send("m-two")
	if b.Immediate != nil {
		t.Fatalf("refused: %s", b.Immediate.Body)
	}
	h := sent(secHeaders("/v1/chat/completions"), b)
	if h[lifecycle.RoutingHeader] != "openai" || h["authorization"] != "Bearer sk-static" {
		t.Fatalf("routed to %q with authorization %q, want the openai channel with its key", h[lifecycle.RoutingHeader], h["authorization"])
	}
	if st, why := tracker.State("two-vertex"); st != health.Cooling || why != health.Credential || grants.Load() != 1 {
		t.Fatalf("the vertex channel is %v (%v) after %d grants, want cooling for its credential after 1", st, why, grants.Load())
	}

	reserves, _, _ := f.Counts()
	b = send("m-vertex")
	if b.Immediate == nil || b.Immediate.Status != 503 || !strings.Contains(string(b.Immediate.Body), `"service_unavailable"`) {
		t.Fatalf("a model whose one channel has no credential: %+v, want 503 service_unavailable", b)
	}
	if n, _, _ := f.Counts(); n != reserves {
		t.Fatalf("%d holds made for a request no channel could take", n-reserves)
	}
}
