package mock

// The clouds' authentication, as strict as the real services: Bedrock verifies each
// request's Signature V4 with the demo secret, Vertex AI accepts only access tokens its
// own token endpoint issued to the demo service account, and the Gemini API wants its
// key in x-goog-api-key, Azure OpenAI in api-key. The mock's routes are wrapped in
// these (requireSigV4, requireVertexToken, requireGeminiKey, azure); a refusal is the
// cloud's own error shape, and a probe in its body counts it with the reason.

import (
	"bytes"
	"crypto/rsa"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/llmgw/gateway/internal/cloudauth"
	"github.com/llmgw/gateway/internal/demoenv"
)

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
	s.cloud.issuer = &cloudauth.TokenIssuer{Email: demoenv.ServiceAccountEmail, TTL: time.Hour, Now: func() time.Time { return s.now() }}
	s.mux.Handle("POST "+TokenPath, s.cloud.issuer)
	s.mux.HandleFunc("POST "+RefusingTokenPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
	})
}

// requireSigV4 lets through only a request signed with the demo AWS key (package
// demoenv) for service bedrock: else 403 with AWS's x-amzn-ErrorType and {"message"}.
// The body is read whole (the signature covers it) and handed on unchanged.
func (s *Server) requireSigV4(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		key := cloudauth.AWSKey{AccessKeyID: demoenv.AWSAccessKeyID, SecretAccessKey: demoenv.AWSSecretAccessKey}
		if err := cloudauth.VerifySigV4(r, body, key, "bedrock", demoenv.AWSRegion, s.now()); err != nil {
			var se *cloudauth.SigV4Error
			errors.As(err, &se)
			s.recordProbe(r, body, se.Type)
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
			why := "no bearer token"
			if ok {
				why = "a token the token endpoint did not issue"
			}
			s.refuseCredential(r, why)
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
			s.refuseCredential(r, "no x-goog-api-key")
			googleError(w, http.StatusForbidden, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
		case !isMockKey(key):
			s.refuseCredential(r, "API_KEY_INVALID")
			googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
				map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"})
		default:
			h(w, r)
		}
	}
}

// azure wraps an OpenAI route as Azure OpenAI's v1 API serves it: the key in api-key
// (a bearer header is not a key there), a missing or unknown one refused with Azure's
// 401; the rest as OpenAI's.
func (s *Server) azure(h handlerFunc) http.HandlerFunc {
	keyOf := func(r *http.Request) string { return r.Header.Get("Api-Key") }
	inner := s.openAIKeyed(keyOf, h)
	return func(w http.ResponseWriter, r *http.Request) {
		if !isMockKey(keyOf(r)) {
			s.refuseCredential(r, "no valid api-key")
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": "401",
				"message": "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}})
			return
		}
		inner(w, r)
	}
}

// isMockKey reports whether key is one the mock providers accept (sk-mock-*).
func isMockKey(key string) bool {
	return strings.HasPrefix(key, mockPrefix) && len(key) > len(mockPrefix)
}

// refuseCredential counts a request refused for its credential in its probe.
func (s *Server) refuseCredential(r *http.Request, why string) {
	body, _ := io.ReadAll(r.Body)
	s.recordProbe(r, body, why)
}

// googleError writes Google's error envelope.
func googleError(w http.ResponseWriter, status int, code, msg string, details ...any) {
	e := map[string]any{"code": status, "message": msg, "status": code}
	if len(details) > 0 {
		e["details"] = details
	}
	writeJSON(w, status, map[string]any{"error": e})
}
