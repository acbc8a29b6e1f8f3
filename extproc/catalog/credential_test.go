package catalog

import (
	"context"
	"io/fs"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/internal/cloudauth"
)

// credentialCatalog is a one-channel catalog whose channel is the YAML flow mapping
// fields (after name, model, cluster and upstream_model).
func credentialCatalog(fields string) []byte {
	return []byte(`
models:
  - {id: m, kind: chat, max_output_tokens: 10, prices: {input_per_mtok: 1, output_per_mtok: 1}}
clusters:
  - {name: up, address: "127.0.0.1:1"}
channels:
  - {name: ch-under-test, model: m, cluster: up, upstream_model: u, ` + fields + `}
`)
}

func TestChannelCredentials(t *testing.T) {
	acct, err := cloudauth.NewServiceAccount("gw@p.iam.gserviceaccount.com", "http://127.0.0.1:1/token")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KEY": "sk-secret", "AKID": "AKIDEXAMPLE", "SECRET": "aws-secret", "TOKEN": "sts-token", "SA": string(acct.JSON)}
	files := map[string]string{"/s/key": "sk-secret\n", "/s/akid": "AKIDEXAMPLE", "/s/secret": "aws-secret", "/s/sa.json": string(acct.JSON), "/s/empty": " \n"}
	lookupEnv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	readFile := func(p string) ([]byte, error) {
		if v, ok := files[p]; ok {
			return []byte(v), nil
		}
		return nil, fs.ErrNotExist
	}
	awsOK := `aws: {region: us-east-1, access_key_id_env: AKID, secret_access_key_file: /s/secret}`
	gcpOK := `gcp: {project: p, location: us-east5, credentials_file: /s/sa.json}`
	for _, tc := range []struct {
		name   string
		fields string
		header string // the header sent; "" when the catalog is refused
		value  string
		style  string // the credential's type when not static
		refuse string // part of the refusal
	}{
		{name: "openai default bearer", fields: `format: openai, credential_env: KEY`, header: "authorization", value: "Bearer sk-secret"},
		{name: "anthropic default x-api-key", fields: `format: anthropic, credential_file: /s/key`, header: "x-api-key", value: "sk-secret"},
		{name: "gemini default x-goog-api-key", fields: `format: gemini, credential_env: KEY`, header: "x-goog-api-key", value: "sk-secret"},
		{name: "azure api-key", fields: `format: openai, credential_env: KEY, credential_header: api-key`, header: "api-key", value: "sk-secret"},
		{name: "bearer on anthropic", fields: `format: anthropic, credential_env: KEY, credential_header: authorization`, header: "authorization", value: "Bearer sk-secret"},
		{name: "bedrock aws", fields: `format: bedrock, ` + awsOK, style: "*credential.AWS"},
		{name: "bedrock aws with session token", fields: `format: bedrock, aws: {region: eu-west-1, access_key_id_file: /s/akid, secret_access_key_env: SECRET, session_token_env: TOKEN}`, style: "*credential.AWS"},
		{name: "vertex-gemini gcp file", fields: `format: vertex-gemini, ` + gcpOK, style: "*credential.GCP"},
		{name: "vertex-anthropic gcp env", fields: `format: vertex-anthropic, gcp: {project: p, location: us-east5, credentials_env: SA}`, style: "*credential.GCP"},

		{name: "unknown header", fields: `format: openai, credential_env: KEY, credential_header: x-secret`, refuse: `credential_header "x-secret" is not one of`},
		{name: "bedrock without aws", fields: `format: bedrock, credential_env: KEY`, refuse: "format bedrock needs an aws credential"},
		{name: "bedrock with aws and a key", fields: `format: bedrock, credential_env: KEY, ` + awsOK, refuse: "format bedrock takes only an aws credential"},
		{name: "bedrock with gcp", fields: `format: bedrock, ` + gcpOK, refuse: "format bedrock needs an aws credential"},
		{name: "vertex-gemini without gcp", fields: `format: vertex-gemini, credential_env: KEY`, refuse: "format vertex-gemini needs a gcp credential"},
		{name: "vertex-anthropic with aws", fields: `format: vertex-anthropic, ` + awsOK, refuse: "format vertex-anthropic needs a gcp credential"},
		{name: "aws on openai", fields: `format: openai, credential_env: KEY, ` + awsOK, refuse: "format openai takes a key"},
		{name: "gcp on gemini", fields: `format: gemini, ` + gcpOK, refuse: "format gemini takes a key"},
		{name: "openai without key", fields: `format: openai`, refuse: "one of credential_env and credential_file is required"},
		{name: "header without key", fields: `format: openai, credential_header: api-key`, refuse: "one of credential_env and credential_file is required"},
		{name: "aws without region", fields: `format: bedrock, aws: {access_key_id_env: AKID, secret_access_key_env: SECRET}`, refuse: "aws.region is required"},
		{name: "aws without secret", fields: `format: bedrock, aws: {region: us-east-1, access_key_id_env: AKID}`, refuse: "one of aws.secret_access_key_env and aws.secret_access_key_file is required"},
		{name: "aws secret twice", fields: `format: bedrock, aws: {region: us-east-1, access_key_id_env: AKID, secret_access_key_env: SECRET, secret_access_key_file: /s/secret}`, refuse: "set only one of aws.secret_access_key_env and aws.secret_access_key_file"},
		{name: "aws secret env unset", fields: `format: bedrock, aws: {region: us-east-1, access_key_id_env: AKID, secret_access_key_env: NOPE}`, refuse: "environment variable NOPE is not set (aws.secret_access_key_env)"},
		{name: "aws unknown field", fields: `format: bedrock, aws: {region: us-east-1, secret_access_key: aws-secret}`, refuse: "unknown field"},
		{name: "gcp without location", fields: `format: vertex-gemini, gcp: {project: p, credentials_file: /s/sa.json}`, refuse: "gcp.project and gcp.location are required"},
		{name: "gcp project not a path segment", fields: `format: vertex-gemini, gcp: {project: "p/../x", location: us-east5, credentials_file: /s/sa.json}`, refuse: "gcp.project and gcp.location must be lowercase ids"},
		{name: "gcp location upper case", fields: `format: vertex-anthropic, gcp: {project: p, location: US-EAST5, credentials_file: /s/sa.json}`, refuse: "gcp.project and gcp.location must be lowercase ids"},
		{name: "gcp file missing", fields: `format: vertex-gemini, gcp: {project: p, location: l, credentials_file: /s/none.json}`, refuse: "gcp.credentials_file"},
		{name: "gcp file empty", fields: `format: vertex-gemini, gcp: {project: p, location: l, credentials_file: /s/empty}`, refuse: "gcp.credentials_file /s/empty is empty"},
		{name: "gcp file not a service account", fields: `format: vertex-gemini, gcp: {project: p, location: l, credentials_file: /s/key}`, refuse: "not a service account key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(credentialCatalog(tc.fields), lookupEnv, readFile)
			if tc.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refuse) {
					t.Fatalf("error %v, want one containing %q", err, tc.refuse)
				}
				if !strings.Contains(err.Error(), "ch-under-test") && !strings.Contains(err.Error(), "unknown field") {
					t.Fatalf("the refusal does not name the channel: %v", err)
				}
				for _, secret := range []string{"sk-secret", "aws-secret", "sts-token", "PRIVATE KEY"} {
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("the refusal shows a secret: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m, _ := c.Model("m")
			cred := m.Channels()[0].Credential()
			if tc.style != "" {
				if got := typeName(cred); got != tc.style {
					t.Fatalf("credential %s, want %s", got, tc.style)
				}
				return
			}
			hs, err := cred.Headers(context.Background(), credential.Request{})
			if err != nil || len(hs) != 1 || hs[0] != (credential.Header{Name: tc.header, Value: tc.value}) {
				t.Fatalf("headers %v, %v", hs, err)
			}
		})
	}
}

// TestCredentialFileReReadOnReload: a rotated key file is read by the next Parse.
func TestCredentialFileReReadOnReload(t *testing.T) {
	key := "sk-old"
	readFile := func(string) ([]byte, error) { return []byte(key), nil }
	doc := credentialCatalog(`format: openai, credential_file: /s/key`)
	for _, want := range []string{"sk-old", "sk-new"} {
		key = want
		c, err := Parse(doc, func(string) (string, bool) { return "", false }, readFile)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := c.Model("m")
		if got := keyOf(t, m.Channels()[0]); got != want {
			t.Fatalf("key %q, want %q", got, want)
		}
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *credential.AWS:
		return "*credential.AWS"
	case *credential.GCP:
		return "*credential.GCP"
	case *credential.Static:
		return "*credential.Static"
	}
	return "other"
}
