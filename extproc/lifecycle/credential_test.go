package lifecycle_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/credential"
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
