package mock

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/internal/cloudauth"
	"github.com/llmgw/gateway/internal/demoenv"
)

// authServer serves the mock with three probe routes behind the clouds' checks, each
// answering 200 with the body it got.
func authServer(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	s := New()
	echo := func(w http.ResponseWriter, r *http.Request) { b, _ := io.ReadAll(r.Body); _, _ = w.Write(b) }
	s.mux.HandleFunc("POST /test/bedrock/{rest...}", s.requireSigV4(echo))
	s.mux.HandleFunc("POST /test/vertex", s.requireVertexToken(echo))
	s.mux.HandleFunc("POST /test/gemini", s.requireGeminiKey(echo))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// call sends body to path with the headers hs, and returns the status, the answer and
// its x-amzn-ErrorType.
func call(t *testing.T, srv *httptest.Server, path string, body []byte, hs []credential.Header) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	for _, h := range hs {
		req.Header.Set(h.Name, h.Value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("X-Amzn-ErrorType")
}

func TestBedrockSigV4(t *testing.T) {
	_, srv := authServer(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	path := "/test/bedrock/model/anthropic.claude-v2%3A1/converse"
	// An inference-profile ARN as the AWS SDK puts it in the path: every byte but the
	// unreserved ones escaped, '/' and ':' included.
	arnPath := "/test/bedrock/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse"
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`)
	sign := func(secret, keyID, path string, b []byte) []credential.Header {
		c, err := credential.NewAWS(credential.AWSConfig{Region: demoenv.AWSRegion, AccessKeyID: keyID, SecretAccessKey: secret})
		if err != nil {
			t.Fatal(err)
		}
		hs, err := c.Headers(context.Background(), credential.Request{Method: http.MethodPost, Host: host, Path: path, Body: b})
		if err != nil {
			t.Fatal(err)
		}
		return hs
	}
	for _, tc := range []struct {
		name    string
		path    string
		hs      []credential.Header
		status  int
		errType string
	}{
		{"demo key", path, sign(demoenv.AWSSecretAccessKey, demoenv.AWSAccessKeyID, path, body), 200, ""},
		{"arn escaped as the SDK does", arnPath, sign(demoenv.AWSSecretAccessKey, demoenv.AWSAccessKeyID, arnPath, body), 200, ""},
		// Sent and signed with ':' unescaped: the service escapes the path it decoded, and
		// that is not what was signed.
		{"colon unescaped, signed as sent", strings.ReplaceAll(path, "%3A", ":"),
			sign(demoenv.AWSSecretAccessKey, demoenv.AWSAccessKeyID, strings.ReplaceAll(path, "%3A", ":"), body), 403, cloudauth.InvalidSignature},
		{"arn escaped by url.PathEscape, signed as sent", strings.ReplaceAll(arnPath, "%3A", ":"),
			sign(demoenv.AWSSecretAccessKey, demoenv.AWSAccessKeyID, strings.ReplaceAll(arnPath, "%3A", ":"), body), 403, cloudauth.InvalidSignature},
		{"signed the unescaped path", path, sign(demoenv.AWSSecretAccessKey, demoenv.AWSAccessKeyID, strings.ReplaceAll(path, "%3A", ":"), body), 403, cloudauth.InvalidSignature},
		{"wrong secret", path, sign("wrong", demoenv.AWSAccessKeyID, path, body), 403, cloudauth.InvalidSignature},
		{"unknown key id", path, sign(demoenv.AWSSecretAccessKey, "AKIAOTHER", path, body), 403, cloudauth.UnrecognizedClient},
		{"signed another body", path, sign(demoenv.AWSSecretAccessKey, demoenv.AWSAccessKeyID, path, []byte(`{}`)), 403, cloudauth.InvalidSignature},
		{"unsigned", path, nil, 403, cloudauth.MissingAuthenticationToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, answer, errType := call(t, srv, tc.path, body, tc.hs)
			if status != tc.status || !strings.HasPrefix(errType, tc.errType) || (tc.errType != "") != (errType != "") {
				t.Fatalf("status %d %q (%s), want %d %s", status, errType, answer, tc.status, tc.errType)
			}
			if status == 200 && answer != string(body) {
				t.Fatalf("the handler got %q", answer)
			}
			if status == 403 {
				var e struct{ Message string }
				if json.Unmarshal([]byte(answer), &e) != nil || e.Message == "" {
					t.Fatalf("not AWS's error shape: %s", answer)
				}
			}
		})
	}
}

func TestVertexToken(t *testing.T) {
	s, srv := authServer(t)
	acct, err := cloudauth.NewServiceAccount(demoenv.ServiceAccountEmail, srv.URL+TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	s.TrustServiceAccount(acct.PublicKey)
	bearer := func(json []byte) ([]credential.Header, error) {
		c, err := credential.NewGCP(credential.GCPConfig{ServiceAccountJSON: json})
		if err != nil {
			t.Fatal(err)
		}
		return c.Headers(context.Background(), credential.Request{})
	}
	hs, err := bearer(acct.JSON)
	if err != nil {
		t.Fatalf("the demo service account got no token: %v", err)
	}
	if status, answer, _ := call(t, srv, "/test/vertex", []byte("ok"), hs); status != 200 || answer != "ok" {
		t.Fatalf("a minted token: %d %s", status, answer)
	}
	for _, tc := range []struct {
		name string
		hs   []credential.Header
	}{
		{"made-up token", []credential.Header{{Name: "authorization", Value: "Bearer ya29.mock-made-up"}}},
		{"no token", nil},
		{"a key instead", []credential.Header{{Name: "x-goog-api-key", Value: "sk-mock-gemini"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, answer, _ := call(t, srv, "/test/vertex", []byte("ok"), tc.hs)
			if status != 401 || !strings.Contains(answer, `"UNAUTHENTICATED"`) {
				t.Fatalf("%d %s", status, answer)
			}
		})
	}

	// Grants the token endpoint must refuse: another key, and the refusing endpoint.
	other, err := cloudauth.NewServiceAccount(demoenv.ServiceAccountEmail, srv.URL+TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := cloudauth.NewServiceAccount(demoenv.ServiceAccountEmail, srv.URL+RefusingTokenPath)
	if err != nil {
		t.Fatal(err)
	}
	for name, js := range map[string][]byte{"untrusted key": other.JSON, "refusing endpoint": revoked.JSON} {
		if hs, err := bearer(js); err == nil {
			t.Fatalf("%s: got %v", name, hs)
		}
	}
}

func TestGeminiKey(t *testing.T) {
	_, srv := authServer(t)
	for _, tc := range []struct {
		name   string
		hs     []credential.Header
		status int
		want   string
	}{
		{"mock key", []credential.Header{{Name: "x-goog-api-key", Value: "sk-mock-gemini"}}, 200, "ok"},
		{"no key", nil, 403, `"PERMISSION_DENIED"`},
		{"key in authorization", []credential.Header{{Name: "authorization", Value: "Bearer sk-mock-gemini"}}, 403, `"PERMISSION_DENIED"`},
		{"wrong key", []credential.Header{{Name: "x-goog-api-key", Value: "AIza-not-ours"}}, 400, `"API_KEY_INVALID"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, answer, _ := call(t, srv, "/test/gemini", []byte("ok"), tc.hs)
			if status != tc.status || !strings.Contains(answer, tc.want) {
				t.Fatalf("%d %s, want %d %s", status, answer, tc.status, tc.want)
			}
		})
	}
}
