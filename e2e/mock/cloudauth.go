package mock

// The clouds' authentication, as strict as the real services: Bedrock verifies each
// request's Signature V4 with the demo secret, Vertex AI accepts only access tokens its
// own token endpoint issued to the demo service account, and the Gemini API wants its
// key in x-goog-api-key. The format handlers wrap themselves in these (requireSigV4,
// requireVertexToken, requireGeminiKey); a refusal is the cloud's own error shape.

import (
	"bytes"
	"crypto/rsa"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/llmgw/gateway/internal/cloudauth"
)

// The demo AWS access key the mock Bedrock accepts (the stack gives it to extproc as
// DEMO_AWS_ACCESS_KEY_ID and DEMO_AWS_SECRET_ACCESS_KEY), and its region.
const (
	DemoAWSAccessKeyID     = "AKIAMOCKDEMO0000000"
	DemoAWSSecretAccessKey = "mock-demo-aws-secret-access-key"
	DemoAWSRegion          = "us-east-1"
)

// DemoServiceAccountEmail is the demo service account's client_email.
const DemoServiceAccountEmail = "gateway-demo@demo-project.iam.gserviceaccount.com"

// Token endpoint paths: TokenPath issues tokens to the demo service account;
// RefusingTokenPath refuses every grant (a service account whose key was revoked).
const (
	TokenPath         = "/oauth2/token"
	RefusingTokenPath = "/oauth2/refusing/token"
)

// cloudAuth is the mock's cloud credentials state.
type cloudAuth struct {
	issuer *cloudauth.TokenIssuer
}

// TrustServiceAccount makes the token endpoint accept grants signed with key (the
// public half of the demo service account the stack made). Call before serving.
func (s *Server) TrustServiceAccount(key *rsa.PublicKey) {
	s.cloud.issuer.PublicKey = key
}

func (s *Server) registerCloudAuth() {
	s.cloud.issuer = &cloudauth.TokenIssuer{Email: DemoServiceAccountEmail, TTL: time.Hour, Now: func() time.Time { return s.now() }}
	s.mux.Handle("POST "+TokenPath, s.cloud.issuer)
	s.mux.HandleFunc("POST "+RefusingTokenPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
	})
}

// requireSigV4 lets through only a request signed with the demo AWS key for service
// bedrock: else 403 with AWS's x-amzn-ErrorType and {"message"}. The body is read
// whole (the signature covers it) and handed on unchanged.
func (s *Server) requireSigV4(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		key := cloudauth.AWSKey{AccessKeyID: DemoAWSAccessKeyID, SecretAccessKey: DemoAWSSecretAccessKey}
		if err := cloudauth.VerifySigV4(r, body, key, "bedrock", DemoAWSRegion, s.now()); err != nil {
			var se *cloudauth.SigV4Error
			errors.As(err, &se)
			w.Header().Set("X-Amzn-ErrorType", se.Type+":http://internal.amazon.com/coral/com.amazon.coral.service/")
			writeJSON(w, http.StatusForbidden, map[string]string{"message": se.Message})
			return
		}
		h(w, r)
	}
}

// requireVertexToken lets through only a bearer token the token endpoint issued and
// that has not expired: else Google's 401 UNAUTHENTICATED.
func (s *Server) requireVertexToken(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !s.cloud.issuer.Valid(tok) {
			googleError(w, http.StatusUnauthorized, "UNAUTHENTICATED",
				"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
			return
		}
		h(w, r)
	}
}

// requireGeminiKey lets through only a mock key (sk-mock-*) in x-goog-api-key, the
// Gemini API's key header: without one 403 PERMISSION_DENIED, with another 400
// INVALID_ARGUMENT (reason API_KEY_INVALID), as the real API answers.
func (s *Server) requireGeminiKey(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Goog-Api-Key")
		switch {
		case key == "":
			googleError(w, http.StatusForbidden, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
		case !strings.HasPrefix(key, mockPrefix):
			googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
				map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"})
		default:
			h(w, r)
		}
	}
}

// googleError writes Google's error envelope.
func googleError(w http.ResponseWriter, status int, code, msg string, details ...any) {
	e := map[string]any{"code": status, "message": msg, "status": code}
	if len(details) > 0 {
		e["details"] = details
	}
	writeJSON(w, status, map[string]any{"error": e})
}
