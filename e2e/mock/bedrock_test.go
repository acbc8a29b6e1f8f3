package mock

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/credential"
	upstream "github.com/llmgw/gateway/extproc/response"
	"github.com/llmgw/gateway/internal/demoenv"
)

// TestBedrockErrors: [[mock:aws_error=TYPE]] answers each error of the Converse API
// reference as Bedrock does (its status, the type only in x-amzn-ErrorType with the
// service's namespace, {"message"}), and the gateway's classification of that answer
// is the code the other providers' errors of its kind get.
func TestBedrockErrors(t *testing.T) {
	srv := httptest.NewServer(New())
	t.Cleanup(srv.Close)
	signer, err := credential.NewAWS(credential.AWSConfig{Region: demoenv.AWSRegion, AccessKeyID: demoenv.AWSAccessKeyID, SecretAccessKey: demoenv.AWSSecretAccessKey})
	if err != nil {
		t.Fatal(err)
	}
	const path = "/model/mock-claude/converse"
	for _, tc := range []struct {
		typ    string
		status int
		code   apierr.Code
	}{
		{"ValidationException", 400, apierr.InvalidRequest},
		{"ServiceQuotaExceededException", 400, apierr.UpstreamAccountUnavailable},
		{"AccessDeniedException", 403, apierr.UpstreamAccountUnavailable},
		{"ResourceNotFoundException", 404, apierr.UpstreamError},
		{"ModelTimeoutException", 408, apierr.UpstreamError},
		{"ModelErrorException", 424, apierr.UpstreamError},
		{"ThrottlingException", 429, apierr.UpstreamAccountUnavailable},
		{"ModelNotReadyException", 429, apierr.ServiceUnavailable},
		{"InternalServerException", 500, apierr.UpstreamError},
		{"ServiceUnavailableException", 503, apierr.ServiceUnavailable},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			body := []byte(`{"messages":[{"role":"user","content":[{"text":"hi [[mock:aws_error=` + tc.typ + `]]"}]}]}`)
			hs, err := signer.Headers(context.Background(), credential.Request{Method: http.MethodPost, Host: strings.TrimPrefix(srv.URL, "http://"), Path: path, Body: body})
			if err != nil {
				t.Fatal(err)
			}
			status, answer, errType := call(t, srv, path, body, hs)
			var e struct{ Message string }
			if status != tc.status || errType != tc.typ+":http://internal.amazon.com/coral/com.amazon.bedrock/" ||
				json.Unmarshal([]byte(answer), &e) != nil || e.Message == "" {
				t.Fatalf("%d %q %s, want %d %s and {\"message\"}", status, errType, answer, tc.status, tc.typ)
			}
			if got := upstream.ClassifyUpstream(upstream.AnthropicMessages, status, "application/json", errType, []byte(answer)); got != tc.code {
				t.Fatalf("classified %s, want %s", got, tc.code)
			}
		})
	}
	// An unknown type is no directive: the answer is a success.
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"hi [[mock:aws_error=NoSuchException]]"}]}]}`)
	hs, err := signer.Headers(context.Background(), credential.Request{Method: http.MethodPost, Host: strings.TrimPrefix(srv.URL, "http://"), Path: path, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if status, answer, _ := call(t, srv, path, body, hs); status != 200 {
		t.Fatalf("unknown type: %d %s", status, answer)
	}
}
