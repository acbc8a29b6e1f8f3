package credential

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/logging"

	"github.com/llmgw/gateway/internal/cloudauth"
)

// received is req as an upstream receives it with the signer's headers set.
func received(t *testing.T, req Request, hs []Header) *http.Request {
	t.Helper()
	r := httptest.NewRequest(req.Method, req.Path, bytes.NewReader(req.Body))
	r.Host = req.Host
	r.Header.Set("Content-Type", "application/json") // unsigned: a proxy may add headers
	for _, h := range hs {
		r.Header.Set(h.Name, h.Value)
	}
	return r
}

func TestAWSSignatureVerifies(t *testing.T) {
	key := cloudauth.AWSKey{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`)
	req := Request{
		Method: http.MethodPost, Host: "bedrock-runtime.us-east-1.amazonaws.com",
		Path: "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream", Body: body,
	}
	for _, tc := range []struct {
		name    string
		token   string
		edit    func(r *Request)
		wantErr string
	}{
		{name: "as signed"},
		{name: "temporary credentials", token: "FwoGZXIvYXdzEXAMPLE"},
		{name: "query kept", edit: func(r *Request) { r.Path += "?trace=1" }},
		{name: "body changed after signing", wantErr: cloudauth.InvalidSignature},
		{name: "path changed after signing", wantErr: cloudauth.InvalidSignature},
		{name: "host changed after signing", wantErr: cloudauth.InvalidSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := key
			k.SessionToken = tc.token
			c, err := NewAWS(AWSConfig{Region: "us-east-1", AccessKeyID: k.AccessKeyID, SecretAccessKey: k.SecretAccessKey, SessionToken: k.SessionToken})
			if err != nil {
				t.Fatal(err)
			}
			at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
			c.now = func() time.Time { return at }
			r := req
			if tc.edit != nil {
				tc.edit(&r)
			}
			hs, err := c.Headers(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			sent := r
			switch tc.name {
			case "body changed after signing":
				sent.Body = bytes.Replace(r.Body, []byte("hi"), []byte("ho"), 1)
			case "path changed after signing":
				sent.Path = "/model/other/converse-stream"
			case "host changed after signing":
				sent.Host = "bedrock-runtime.eu-west-1.amazonaws.com"
			}
			got := received(t, sent, hs)
			err = cloudauth.VerifySigV4(got, sent.Body, k, "bedrock", "us-east-1", at.Add(time.Minute))
			var se *cloudauth.SigV4Error
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("the SDK's recomputation refuses: %v", err)
			case tc.wantErr != "" && (!errors.As(err, &se) || se.Type != tc.wantErr):
				t.Fatalf("verification = %v, want %s", err, tc.wantErr)
			}
			if tc.wantErr == "" {
				// The body hash sent and the signed headers are the ones required.
				if got.Header.Get("X-Amz-Content-Sha256") == "" || got.Header.Get("X-Amz-Date") != "20250601T120000Z" {
					t.Fatalf("headers %v", hs)
				}
			}
		})
	}
}

func TestAWSWrongSecretRefused(t *testing.T) {
	c, err := NewAWS(AWSConfig{Region: "us-east-1", AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "not-the-secret"})
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Method: http.MethodPost, Host: "h", Path: "/model/m/converse", Body: []byte(`{}`)}
	hs, err := c.Headers(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	err = cloudauth.VerifySigV4(received(t, req, hs), req.Body, cloudauth.AWSKey{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "the-secret"}, "bedrock", "us-east-1", time.Now())
	var se *cloudauth.SigV4Error
	if !errors.As(err, &se) || se.Type != cloudauth.InvalidSignature {
		t.Fatalf("a wrong secret verifies: %v", err)
	}
}

// TestAWSCanonicalURIOfAnEscapedModelID: a Bedrock path holding an escaped model ARN
// is signed as sent, and the SDK signer escapes it once more in the canonical request
// (SigV4 for every service but S3), as AWS recomputes it: read from the SDK signer's
// own signing log.
func TestAWSCanonicalURIOfAnEscapedModelID(t *testing.T) {
	c, err := NewAWS(AWSConfig{Region: "us-east-1", AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	c.signer = v4.NewSigner(func(o *v4.SignerOptions) {
		o.LogSigning = true
		o.Logger = logging.LoggerFunc(func(_ logging.Classification, format string, v ...any) {
			fmt.Fprintf(&logged, format, v...)
		})
	})
	path := "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.anthropic.claude-v2%3A0/converse"
	if _, err := c.Headers(context.Background(), Request{Method: http.MethodPost, Host: "h", Path: path, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	want := "POST\n/model/arn%253Aaws%253Abedrock%253Aus-east-1%253A1%253Ainference-profile%252Fus.anthropic.claude-v2%253A0/converse\n"
	if !strings.Contains(logged.String(), want) {
		t.Fatalf("canonical request:\n%s\nwant it to start with\n%s", logged.String(), want)
	}
}
