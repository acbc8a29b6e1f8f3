// Package mock is the mock upstream providers of the local stack and the e2e suite: an
// OpenAI-compatible provider (chat completions, responses, embeddings, speech, images),
// an Anthropic-compatible provider (messages) and a small video-task provider, all on
// one HTTP listener, speaking the real wire formats (JSON and SSE) and reporting usage
// the way each real provider does.
//
// Answers are deterministic: they derive from the request (the words of the last user
// message are echoed), and directives in that message steer tests ([[mock:tokens=K]],
// [[mock:slow=N]], [[mock:cut]], [[mock:pad=BYTES]], [[mock:tool=NAME]], [[mock:gap=MS]];
// see docs/local-stack.md). Stop sequences and output limits are honoured, and
// each provider is as strict as its real counterpart (strict.go: unknown top-level
// fields, roles, orphan tool results, image sources are 400s in its own shape). A body carrying
// [[mock:probe=ID]] is counted: GET /mock/probes/{ID} tells how many provider requests
// carried it, how many of them carried no credential, and their x-envoy-* headers (the
// e2e suite checks the front sent one attempt and no client instructions). Credentials follow
// the team conventions: any sk-mock-* key works except sk-mock-exhausted (the provider's
// own out-of-funds error); anything else gets the provider's 401; a request carrying a
// gateway key (a gw- header value) is refused. Upstream model mock-broken answers an
// unusable HTML page. Every response names the upstream model it was asked for.
//
// The cloud formats are served too: the Gemini API and Vertex AI's Gemini (gemini.go),
// Claude on Vertex AI (vertex.go), Bedrock Converse (bedrock.go), and the OpenAI routes
// under /openai/v1 as Azure OpenAI's v1 API serves them (its key in api-key). The
// clouds' own authentication (cloudauth.go) is checked with internal/cloudauth against
// the demo credentials of internal/demoenv; a refused attempt is still counted by its
// probe, with the reason.
//
// The package depends only on the standard library, the e2e commands' serve helper,
// internal/cloudauth, internal/demoenv and the AWS SDK's event-stream encoder (Bedrock's stream framing).
package mock

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/llmgw/gateway/e2e/internal/serve"
	"github.com/llmgw/gateway/internal/cloudauth"
	"github.com/llmgw/gateway/internal/logging"
)

// Server is the mock providers' HTTP handler. Safe for concurrent use.
type Server struct {
	mux *http.ServeMux
	// now is the clock (tests may replace it before serving).
	now func() time.Time

	cloud cloudAuth

	mu     sync.Mutex
	videos map[string]*videoTask
	seq    int
	probes map[string]*Probe
}

// Probe is what the mock saw of the provider requests that carried one probe marker
// ([[mock:probe=ID]] anywhere in the body): how many arrived (a retry by the gateway
// front shows as a second attempt) and the x-envoy-* headers they carried.
type Probe struct {
	Attempts     int                 `json:"attempts"`
	EnvoyHeaders map[string][]string `json:"envoy_headers"`
	// Refusals are the attempts a cloud refused for their credential, in order: the
	// path, then why (refuseCredential).
	Refusals []string `json:"refusals,omitempty"`
	// Uncredentialed counts the attempts that carried no credential header at all
	// (credentialHeaders): a gateway that could not get a channel's credential must send
	// that channel nothing, so a test asserts this stays 0.
	Uncredentialed int `json:"uncredentialed"`
}

// credentialHeaders are the headers a provider credential arrives in: a bearer token or
// a Signature V4 (authorization), Anthropic's x-api-key, Azure's api-key, the Gemini
// API's x-goog-api-key.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"}

// uncredentialed reports whether h carries no credential header.
func uncredentialed(h http.Header) bool {
	for _, name := range credentialHeaders {
		if h.Get(name) != "" {
			return false
		}
	}
	return true
}

// maxProbes bounds the probes kept (the oldest are not evicted: past it, new probes
// are not recorded).
const maxProbes = 10000

const probeMarker = "[[mock:probe="

// recordProbe counts a provider request that carries a probe marker; refusal is why
// its credential was refused, "" when it was not.
func (s *Server) recordProbe(r *http.Request, raw []byte, refusal string) {
	i := bytes.Index(raw, []byte(probeMarker))
	if i < 0 {
		return
	}
	rest := raw[i+len(probeMarker):]
	j := bytes.Index(rest, []byte("]]"))
	if j <= 0 || j > 64 {
		return
	}
	id := string(rest[:j])
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.probes[id]
	if p == nil {
		if len(s.probes) >= maxProbes {
			return
		}
		p = &Probe{EnvoyHeaders: map[string][]string{}}
		s.probes[id] = p
	}
	p.Attempts++
	if uncredentialed(r.Header) {
		p.Uncredentialed++
	}
	if refusal != "" {
		p.Refusals = append(p.Refusals, r.URL.Path+": "+refusal)
	}
	for k, vs := range r.Header {
		if k = strings.ToLower(k); strings.HasPrefix(k, "x-envoy") {
			p.EnvoyHeaders[k] = append(p.EnvoyHeaders[k], vs...)
		}
	}
}

// probe answers GET /mock/probes/{id}: the Probe as JSON, 404 when none arrived.
func (s *Server) probe(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	p, ok := s.probes[r.PathValue("id")]
	var out Probe
	if ok {
		out = Probe{Attempts: p.Attempts, EnvoyHeaders: map[string][]string{}, Refusals: slices.Clone(p.Refusals), Uncredentialed: p.Uncredentialed}
		for k, v := range p.EnvoyHeaders {
			out.EnvoyHeaders[k] = slices.Clone(v)
		}
	}
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": "no request carried this probe"}})
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// New returns a Server with every route registered.
func New() *Server {
	s := &Server{mux: http.NewServeMux(), now: time.Now, videos: map[string]*videoTask{}, probes: map[string]*Probe{}}
	s.mux.HandleFunc("POST /v1/chat/completions", s.openAI(s.chatCompletions))
	s.mux.HandleFunc("POST /v1/responses", s.openAI(s.responses))
	s.mux.HandleFunc("POST /v1/embeddings", s.openAI(s.embeddings))
	s.mux.HandleFunc("POST /v1/audio/speech", s.openAI(s.speech))
	s.mux.HandleFunc("POST /v1/images/generations", s.openAI(s.images))
	s.mux.HandleFunc("POST /v1/messages", s.anthropic(s.messages))
	s.mux.HandleFunc("POST /v1/messages/count_tokens", s.anthropic(s.countTokens))
	s.mux.HandleFunc("POST /v1/video/generations", s.openAI(s.videoSubmit))
	s.mux.HandleFunc("GET /v1/videos/{id}", s.openAI(s.videoGet))
	s.mux.HandleFunc("POST /v1beta/models/{call}", s.requireGeminiKey(s.gemini))
	s.mux.HandleFunc("POST /v1/projects/{project}/locations/{location}/publishers/google/models/{call}", s.requireVertexToken(s.gemini))
	s.mux.HandleFunc("POST /v1/projects/{project}/locations/{location}/publishers/anthropic/models/{call}", s.requireVertexToken(s.vertexClaude))
	s.mux.HandleFunc("POST /model/{model}/{method}", s.requireSigV4(s.bedrock))
	s.mux.HandleFunc("POST /openai/v1/chat/completions", s.azure(s.chatCompletions))
	s.mux.HandleFunc("POST /openai/v1/responses", s.azure(s.responses))
	s.mux.HandleFunc("GET /mock/probes/{id}", s.probe)
	s.registerCloudAuth()
	return s
}

// ServeHTTP serves the mock providers.
// Answers are gzip-compressed when the request allows it (see compressing).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	compressing(s.mux).ServeHTTP(w, r)
}

// request is a parsed provider request.
type request struct {
	r    *http.Request
	body map[string]any
	raw  []byte
	// key is the provider credential presented.
	key   string
	model string
}

type handlerFunc func(w http.ResponseWriter, q *request)

const (
	exhaustedKey = "sk-mock-exhausted"
	mockPrefix   = "sk-mock-"
	brokenModel  = "mock-broken"
)

// leaksGatewayKey reports whether any header carries a gateway key.
func leaksGatewayKey(h http.Header) bool {
	for _, vs := range h {
		for _, v := range vs {
			v = strings.TrimSpace(v)
			if strings.HasPrefix(v, "gw-") || strings.HasPrefix(strings.TrimPrefix(v, "Bearer "), "gw-") {
				return true
			}
		}
	}
	return false
}

func (s *Server) parse(w http.ResponseWriter, r *http.Request, key string, fail func(status int, typ, code, msg string)) (*request, bool) {
	if leaksGatewayKey(r.Header) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "gateway key leaked to provider"}})
		return nil, false
	}
	q := &request{r: r, key: key, body: map[string]any{}}
	if r.Method == http.MethodPost {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, false
		}
		q.raw = raw
		s.recordProbe(r, raw, "")
		if err := json.Unmarshal(raw, &q.body); err != nil {
			fail(http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
			return nil, false
		}
		q.model, _ = q.body["model"].(string)
	}
	return q, true
}

// openAI wraps an OpenAI-format route: leak check, JSON, bearer credential.
func (s *Server) openAI(h handlerFunc) http.HandlerFunc {
	return s.openAIKeyed(func(r *http.Request) string { return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") }, h)
}

// openAIKeyed is openAI with the key read by keyOf.
func (s *Server) openAIKeyed(keyOf func(*http.Request) string, h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fail := func(status int, typ, code, msg string) { openAIError(w, status, typ, code, msg) }
		key := keyOf(r)
		q, ok := s.parse(w, r, key, fail)
		if !ok {
			return
		}
		switch {
		case key == exhaustedKey:
			openAIError(w, http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota",
				"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.")
			return
		case !isMockKey(key):
			openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
				"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.")
			return
		case q.model == brokenModel:
			writeBroken(w)
			return
		}
		if msg := strictError(r.URL.Path, q.body); msg != "" {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", "", msg)
			return
		}
		h(w, q)
	}
}

// anthropic wraps an Anthropic-format route: leak check, JSON, x-api-key credential,
// anthropic-version header.
func (s *Server) anthropic(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fail := func(status int, typ, _, msg string) { anthropicError(w, status, typ, msg) }
		key := r.Header.Get("X-Api-Key")
		q, ok := s.parse(w, r, key, fail)
		if !ok {
			return
		}
		switch {
		case key == exhaustedKey:
			anthropicError(w, http.StatusBadRequest, "invalid_request_error",
				"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")
			return
		case !isMockKey(key):
			anthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
			return
		case r.Header.Get("Anthropic-Version") == "":
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
			return
		case q.model == brokenModel:
			writeBroken(w)
			return
		}
		if msg := strictError(r.URL.Path, q.body); msg != "" {
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", msg)
			return
		}
		h(w, q)
	}
}

func writeBroken(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "<html><head><title>502 Bad Gateway</title></head><body><h1>upstream maintenance</h1></body></html>\n")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func openAIError(w http.ResponseWriter, status int, typ, code, msg string) {
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
}

func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Main runs the mock providers: `mockproviders --listen 127.0.0.1:18080`, until ctx is
// done; it returns the process exit code.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("mockproviders", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", envOr("MOCK_ADDR", "127.0.0.1:18080"), "address to listen on")
	gcpKey := fs.String("gcp-public-key", "", "PEM file of the demo service account's public key (the token endpoint refuses every grant without it)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	mock := New()
	if *gcpKey != "" {
		b, err := os.ReadFile(*gcpKey)
		if err == nil {
			var k *rsa.PublicKey
			if k, err = cloudauth.ParsePublicKeyPEM(b); err == nil {
				mock.TrustServiceAccount(k)
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, "mockproviders: --gcp-public-key:", err)
			return 2
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "mockproviders:", err)
		return 1
	}
	logger := logging.Std(stderr, "mockproviders")
	srv := &http.Server{Handler: mock, ReadHeaderTimeout: 10 * time.Second, ErrorLog: logger}
	logger.Printf("mock OpenAI, Anthropic and video providers listening on %s", ln.Addr())
	if err := serve.Until(ctx, srv, ln); err != nil {
		fmt.Fprintln(stderr, "mockproviders:", err)
		return 1
	}
	return 0
}
