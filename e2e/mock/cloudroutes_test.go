package mock

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/internal/cloudauth"
	"github.com/llmgw/gateway/internal/demoenv"
)

// TestCloudRoutesCheckCredentials: every cloud route of the mock answers only the
// credential its cloud takes, made as the gateway makes it (package credential) from
// the demo credentials (package demoenv); any other is the cloud's refusal, never a
// silent pass, and a probe in the refused body counts the attempt with the reason.
func TestCloudRoutesCheckCredentials(t *testing.T) {
	s := New()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	acct, err := cloudauth.NewServiceAccount(demoenv.ServiceAccountEmail, srv.URL+TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	s.TrustServiceAccount(acct.PublicKey)
	revoked, err := cloudauth.NewServiceAccount(demoenv.ServiceAccountEmail, srv.URL+RefusingTokenPath)
	if err != nil {
		t.Fatal(err)
	}
	headers := func(cfg credential.Config, path string, body []byte) []credential.Header {
		c, err := credential.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hs, err := c.Headers(context.Background(), credential.Request{Method: http.MethodPost, Host: host, Path: path, Body: body})
		if err != nil {
			return nil // no token: the gateway sends the request without one
		}
		return hs
	}
	aws := func(secret string) credential.Config {
		return credential.Config{AWS: &credential.AWSConfig{Region: demoenv.AWSRegion, AccessKeyID: demoenv.AWSAccessKeyID, SecretAccessKey: secret}}
	}
	gcp := func(a *cloudauth.ServiceAccount) credential.Config {
		return credential.Config{GCP: &credential.GCPConfig{ServiceAccountJSON: a.JSON}}
	}
	key := func(header, k string) credential.Config { return credential.Config{Header: header, Key: k} }
	const (
		gemini  = "/v1beta/models/mock-gemini:generateContent"
		vertexG = "/v1/projects/demo-project/locations/us-east5/publishers/google/models/mock-gemini:generateContent"
		vertexC = "/v1/projects/demo-project/locations/us-east5/publishers/anthropic/models/mock-claude:rawPredict"
		bedrock = "/model/mock-claude/converse"
		azure   = "/openai/v1/chat/completions"
	)
	bodies := map[string]string{
		gemini:  `{"contents":[{"role":"user","parts":[{"text":"hi %s"}]}]}`,
		vertexG: `{"contents":[{"role":"user","parts":[{"text":"hi %s"}]}]}`,
		vertexC: `{"anthropic_version":"vertex-2023-10-16","max_tokens":10,"messages":[{"role":"user","content":"hi %s"}]}`,
		bedrock: `{"messages":[{"role":"user","content":[{"text":"hi %s"}]}]}`,
		azure:   `{"model":"mock-gpt","messages":[{"role":"user","content":"hi %s"}]}`,
	}
	for _, tc := range []struct {
		name, path string
		cfg        credential.Config
		status     int
		refusal    string // the probe's reason; "" when answered
	}{
		{"gemini key", gemini, key(credential.HeaderGoogAPIKey, "sk-mock-gemini"), 200, ""},
		{"gemini wrong key", gemini, key(credential.HeaderGoogAPIKey, "AIza-not-ours"), 400, "API_KEY_INVALID"},
		{"gemini key as bearer", gemini, key(credential.HeaderAuthorization, "sk-mock-gemini"), 403, "no x-goog-api-key"},
		{"vertex gemini token", vertexG, gcp(acct), 200, ""},
		{"vertex gemini refused grant", vertexG, gcp(revoked), 401, "no bearer token"},
		{"vertex gemini mock key", vertexG, key(credential.HeaderAuthorization, "sk-mock-openai"), 401, "a token the token endpoint did not issue"},
		{"vertex claude token", vertexC, gcp(acct), 200, ""},
		{"vertex claude refused grant", vertexC, gcp(revoked), 401, "no bearer token"},
		{"bedrock signed", bedrock, aws(demoenv.AWSSecretAccessKey), 200, ""},
		{"bedrock wrong secret", bedrock, aws(demoenv.AWSWrongSecretAccessKey), 403, cloudauth.InvalidSignature},
		{"bedrock mock key", bedrock, key(credential.HeaderAuthorization, "sk-mock-anthropic"), 403, cloudauth.InvalidSignature},
		{"bedrock unsigned", bedrock, key(credential.HeaderXAPIKey, "sk-mock-anthropic"), 403, cloudauth.MissingAuthenticationToken},
		{"azure api-key", azure, key(credential.HeaderAPIKey, "sk-mock-azure"), 200, ""},
		{"azure key as bearer", azure, key(credential.HeaderAuthorization, "sk-mock-azure"), 401, "no valid api-key"},
		{"azure wrong key", azure, key(credential.HeaderAPIKey, "not-ours"), 401, "no valid api-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probe := strings.ReplaceAll(tc.name, " ", "-")
			body := []byte(strings.Replace(bodies[tc.path], "%s", "[[mock:probe="+probe+"]]", 1))
			status, answer, _ := call(t, srv, tc.path, body, headers(tc.cfg, tc.path, body))
			if status != tc.status {
				t.Fatalf("%d %s, want %d", status, answer, tc.status)
			}
			p := s.probes[probe]
			if p == nil || p.Attempts != 1 {
				t.Fatalf("probe %+v, want one attempt", p)
			}
			var refusals []string
			if tc.refusal != "" {
				refusals = []string{tc.path + ": " + tc.refusal}
			}
			if got, _ := json.Marshal(p.Refusals); string(got) != mustJSON(refusals) {
				t.Errorf("refusals %s, want %s", got, mustJSON(refusals))
			}
		})
	}
}

func mustJSON(v []string) string {
	b, _ := json.Marshal(v)
	return string(b)
}
