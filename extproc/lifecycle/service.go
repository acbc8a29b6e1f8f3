package lifecycle

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/anthropic"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/openai"
	"github.com/llmgw/gateway/extproc/tokens"
	"github.com/llmgw/gateway/extproc/translate"
	"github.com/llmgw/gateway/extproc/video"
	"github.com/llmgw/gateway/extproc/webhook"
	"github.com/llmgw/gateway/extproc/wire"
	"go.uber.org/zap"
)

// MaxLoggedRequestID bounds the x-request-id kept for the settlement record: the header
// can come from the client.
const MaxLoggedRequestID = 128

// RoutingHeader carries the Envoy cluster the request goes to (the route's
// cluster_header).
const RoutingHeader = "x-gateway-upstream"

// AnthropicVersion is sent upstream when the client sent no anthropic-version.
const AnthropicVersion = "2023-06-01"

// Config wires a Service. Catalog, Ledger and Counter are required.
type Config struct {
	Catalog *catalog.Catalog
	Ledger  Ledger
	Counter *tokens.Counter
	// Intn draws the weighted channel choice; math/rand/v2.IntN when nil.
	Intn func(n int) int
	// NewID makes reservation idempotency keys; 128 random bits in hex when nil.
	NewID func() string
	// Now is the clock for key expiry; time.Now when nil.
	Now func() time.Time
	// LeaseTTL is a hold's lease (DefaultLeaseTTL when zero): accounting expires a hold
	// this long after its last renewal, and its owner renews it every third of it.
	LeaseTTL time.Duration
	// Webhooks checks video webhook URLs (own hosts, DNS); a Validator with the system
	// resolver and no own hosts when nil.
	Webhooks *webhook.Validator
	// AuthFailures bounds invalid_api_key refusals per client address (defaults when
	// zero; see AuthFailures).
	AuthFailures AuthFailures
	// Log receives lifecycle events; never a key. Nop when nil.
	Log *zap.Logger
}

// Service creates Requests. Safe for concurrent use.
type Service struct {
	cfg   Config
	fails *failLimiter
	// pending counts the background work that outlives a stream: settlements and
	// abandoned reservations (WaitSettled).
	pending sync.WaitGroup
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Catalog == nil || cfg.Ledger == nil || cfg.Counter == nil {
		return nil, errors.New("lifecycle: Catalog, Ledger and Counter are required")
	}
	if cfg.Intn == nil {
		cfg.Intn = rand.IntN
	}
	if cfg.NewID == nil {
		cfg.NewID = randomID
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Webhooks == nil {
		cfg.Webhooks = &webhook.Validator{}
	}
	return &Service{cfg: cfg, fails: newFailLimiter(cfg.AuthFailures)}, nil
}

func randomID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NewRequest starts the lifecycle of one HTTP request.
func (s *Service) NewRequest() *Request {
	return &Request{svc: s, contentLength: -1, counted: -1}
}

// Request is one HTTP request's lifecycle. Not safe for concurrent use.
type Request struct {
	svc *Service

	endpoint      Endpoint
	env           apierr.Envelope
	contentLength int64
	hasKey        bool
	keyOK         bool // the presented key has the gateway key shape
	keyConflict   bool // Authorization and x-api-key carry different keys
	keyHash       [sha256.Size]byte
	clientVersion bool // the client sent anthropic-version
	// addr is the client's address as Envoy reports it ("" when unknown).
	addr string
	// upstreamPath is :path without the client's query string, set when one was sent.
	upstreamPath string
	// bufferedBody: Envoy said (protocol_config) it sends the request body BUFFERED, so
	// its one body message is the whole body, with or without end_of_stream.
	bufferedBody bool

	parsed  wire.Parsed
	counted int64 // the prompt's plain token count; -1 until counted
	model   *catalog.Model
	channel *catalog.Channel
	grant   ledger.Grant

	units int64 // billed units of a per-unit endpoint (characters, images, seconds)

	requestID string // Envoy's x-request-id, for the record
	tr        *reqTrace

	reservation *ledger.Reservation
	hold        *hold // kept (renewed) until settled
	settled     bool
	// sent: the request was let through to the provider (settlement.go).
	sent bool
	// proxied: the request was routed upstream without a reservation (video task
	// reads); its response is rewritten but never settled.
	proxied bool
	// taskID is the gateway's id of the video task a GET reads: the upstream's answer
	// carries the provider's id, which is replaced by this one.
	taskID string
	resp   *responseState
	// xlate translates between the client's chat API and the channel's, when they differ
	// (translation.go); nil otherwise.
	xlate *translate.Translator

	// failed is the API error code extproc answered with; verdict the settlement decided
	// before a reply; reported the Facts the last reply carried (facts.go).
	failed   apierr.Code
	verdict  verdict
	reported Facts
}

// Reservation returns the request's reservation, if admitted.
func (r *Request) Reservation() (ledger.Reservation, bool) {
	if r.reservation == nil {
		return ledger.Reservation{}, false
	}
	return *r.reservation, true
}

// Channel returns the channel the request was routed to, if admitted.
func (r *Request) Channel() *catalog.Channel { return r.channel }

func (r *Request) fail(e *apierr.Error) Action {
	r.failed = e.Code
	return Action{Immediate: errImmediate(e, r.env)}
}

// EnvoyHeaderPrefix starts the headers Envoy itself acts on (x-envoy-retry-on,
// x-envoy-max-retries, x-envoy-upstream-rq-timeout-ms, ...): the prefix Envoy's header
// mutation rules guard with allow_envoy.
const EnvoyHeaderPrefix = "x-envoy"

// forwardedHeaders are the client's request headers that reach a provider (spec:
// the body is JSON; anthropic-version is the Anthropic endpoints' only header), plus
// the ones Envoy owns (content-length, host, transfer-encoding framing, x-request-id).
// Every other client header is removed: account selectors (OpenAI-Organization,
// OpenAI-Project), feature switches a catalog price does not cover (OpenAI-Beta,
// anthropic-beta: the catalog prices no beta, so a beta is dropped and the request is
// served and billed as without it), cookies, proxy credentials, the client's address
// headers, custom headers and every x-envoy-* header. The gateway's own upstream
// headers (credential, anthropic-version default, the routing header) are set by the
// body reply after this removal. Pseudo-headers are never removed (Envoy refuses to).
var forwardedHeaders = []string{"content-type", "accept", "content-length", "host", "transfer-encoding", "x-request-id"}

// RequestHeaders handles the request headers. endOfStream is true when no body
// follows (GET, or a body of length 0).
//
// Whenever the request goes on towards an upstream, the reply removes every client
// header but forwardedHeaders (and anthropic-version on the Anthropic endpoints). The
// x-envoy-* ones matter most: the router reads retry and timeout instructions from
// them after extproc, so a client's copy could make one billed request reach the
// provider several times; removing them needs the ext_proc filter's mutation_rules
// allow_envoy. The query string is cut from :path (no endpoint defines one; a key sent
// as ?api_key= must not reach the provider): Envoy lets ext_proc set a pseudo-header
// other than the routing ones unless mutation_rules disallow_system is set
// (mutation_rules.cc, Checker::check). A client's routing header is removed with the
// route cache cleared, so the route is picked again without it.
func (r *Request) RequestHeaders(ctx context.Context, headers []Header, endOfStream bool) Action {
	ctx = r.traceHeaders(ctx, headers)
	a := r.requestHeaders(ctx, headers, endOfStream)
	if a.Immediate != nil {
		return r.withFacts(a)
	}
	for _, h := range headers {
		name := strings.ToLower(h.Name)
		if strings.HasPrefix(name, ":") || slices.Contains(forwardedHeaders, name) ||
			name == "anthropic-version" && r.env == apierr.Anthropic {
			continue
		}
		if name == RoutingHeader {
			a.ClearRouteCache = true
		}
		if !slices.Contains(a.RemoveHeaders, name) {
			a.RemoveHeaders = append(a.RemoveHeaders, name)
		}
	}
	if r.upstreamPath != "" {
		a.SetHeaders = append(a.SetHeaders, Header{":path", r.upstreamPath})
	}
	return r.withFacts(a)
}

func (r *Request) requestHeaders(ctx context.Context, headers []Header, endOfStream bool) Action {
	var method, path, auth, xKey string
	twoKeys := false // a key header repeated with another value
	for _, h := range headers {
		switch h.Name {
		case ":method":
			method = h.Value
		case ":path":
			path = h.Value
		case "content-length":
			if n, err := strconv.ParseInt(h.Value, 10, 64); err == nil {
				r.contentLength = n
			}
		case "authorization":
			twoKeys = twoKeys || auth != "" && auth != h.Value
			auth = h.Value
		case "x-api-key":
			twoKeys = twoKeys || xKey != "" && xKey != h.Value
			xKey = h.Value
		case "x-request-id":
			r.requestID = truncate(h.Value, MaxLoggedRequestID)
		case "anthropic-version":
			r.clientVersion = true
		}
	}
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
		r.upstreamPath = path
	}
	ep, taskID, ok := byPath(path)
	if !ok {
		r.env = apierr.OpenAI
		return r.fail(apierr.New(apierr.NotFound, "Unknown request URL: "+method+" "+truncate(path, 200)+"."))
	}
	sp := ep.spec()
	r.endpoint, r.env = ep, sp.env
	if method != sp.method {
		a := r.fail(apierr.New(apierr.MethodNotAllowed, "Method "+truncate(method, 16)+" is not allowed on "+path+"; use "+sp.method+"."))
		a.Immediate.Headers = append(a.Immediate.Headers, Header{"allow", sp.method})
		return a
	}
	r.addr = clientAddress(headers)
	if d := r.svc.fails.blocked(r.addr, r.svc.cfg.Now()); r.addr != "" && d > 0 {
		e := apierr.New(apierr.RateLimitExceeded, "Too many requests with an invalid API key came from this address; retry later.")
		e.RetryAfter = retryAfterSeconds(d)
		return r.fail(e)
	}
	r.readKey(auth, xKey)
	if twoKeys {
		// Served on either copy, the request would be billed to a key the client may not
		// have meant (Envoy hands every copy of a repeated header over in order).
		r.hasKey, r.keyConflict, r.keyOK = true, true, false
	}
	switch r.endpoint {
	case EndpointModels:
		return r.listModels(ctx)
	case EndpointVideoGet:
		return r.videoTask(ctx, taskID)
	}
	if r.contentLength > wire.MaxBodyBytes {
		return r.fail(tooLarge())
	}
	// A key that is missing, malformed or ambiguous can be refused without reading the
	// body or asking accounting: refusing it here, before Envoy buffers up to 2 MiB for
	// the body phase, keeps an unauthenticated client from holding a buffer and an
	// ext_proc stream (package doc, admission order).
	if !r.hasKey || r.keyConflict || !r.keyOK {
		return r.fail(r.authenticate(ctx))
	}
	if endOfStream {
		return r.fail(apierr.New(apierr.InvalidRequest, "The request body is empty; a JSON object is required."))
	}
	// Envoy routes on this header: a client's copy must never choose the cluster.
	return Action{RemoveHeaders: []string{RoutingHeader}}
}

func tooLarge() *apierr.Error {
	return apierr.New(apierr.RequestBodyTooLarge, "The request body exceeds the 2 MiB limit.")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// readKey takes the key from "authorization: Bearer" or x-api-key and keeps only its
// hash.
//
// The two headers are two ways to send the same key (spec section 5): a request that
// sends two different keys is refused rather than served on either.
func (r *Request) readKey(auth, xKey string) {
	bearer := ""
	if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		bearer = strings.TrimSpace(auth[7:])
	}
	other := strings.TrimSpace(xKey)
	key := bearer
	if key == "" {
		key = other
	}
	if key == "" {
		return
	}
	r.hasKey = true
	r.keyConflict = bearer != "" && other != "" && bearer != other
	r.keyOK = !r.keyConflict && strings.HasPrefix(key, "gw-") && len(key) >= 3+43
	r.keyHash = sha256.Sum256([]byte(key))
}

// authenticate resolves the key to a grant, or the error to answer with. An
// invalid_api_key answer counts against the client's address (AuthFailures).
func (r *Request) authenticate(ctx context.Context) *apierr.Error {
	e := r.authenticateKey(ctx)
	if e != nil && e.Code == apierr.InvalidAPIKey && r.addr != "" {
		r.svc.fails.failed(r.addr, r.svc.cfg.Now())
	}
	return e
}

func (r *Request) authenticateKey(ctx context.Context) *apierr.Error {
	if !r.hasKey {
		return apierr.New(apierr.InvalidAPIKey, "Missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'.")
	}
	if r.keyConflict {
		return apierr.New(apierr.InvalidAPIKey, "The request carries different keys (in 'Authorization' and 'x-api-key', or in a repeated header): send one key.")
	}
	if !r.keyOK {
		return apierr.New(apierr.InvalidAPIKey, "Invalid API key.")
	}
	g, err := r.svc.cfg.Ledger.Authenticate(ctx, r.keyHash[:])
	if err != nil {
		return r.ledgerError(err, "authenticate")
	}
	if g.ExpiresAt != nil && !r.svc.cfg.Now().Before(*g.ExpiresAt) {
		return apierr.New(apierr.InvalidAPIKey, "Invalid API key.")
	}
	r.grant = g
	return nil
}

// ledgerError maps an accounting error to the client's error: a Refusal by its reason,
// anything else (accounting unreachable) as service_unavailable.
func (r *Request) ledgerError(err error, op string) *apierr.Error {
	var ref *ledger.Refusal
	if !errors.As(err, &ref) {
		r.log().Warn("accounting call failed", zap.String("op", op), zap.Error(err))
		return apierr.New(apierr.ServiceUnavailable, "The service is temporarily unable to authorize requests.")
	}
	switch ref.Reason {
	case ledger.ReasonInvalidAPIKey:
		return apierr.New(apierr.InvalidAPIKey, "Invalid API key.")
	case ledger.ReasonAccountSuspended:
		return apiAccountSuspended()
	case ledger.ReasonInsufficientCredits:
		return apierr.New(apierr.InsufficientCredits, "Available credits cannot cover the request's maximum estimated cost (credits held by in-flight requests are not available). Lower the output-token limit, wait for a request to finish, or add credits.")
	case ledger.ReasonKeyLimitReached:
		e := apierr.New(apierr.KeyLimitReached, "The request would cross the key's "+limitName(ref.Limit)+"spend limit.")
		e.RetryAfter = ref.RetryAfter
		return e
	case ledger.ReasonConcurrencyLimitExceeded:
		e := apierr.New(apierr.ConcurrencyLimitExceeded, "Too many requests are in flight on the account.")
		e.RetryAfter = ref.RetryAfter
		if e.RetryAfter <= 0 {
			e.RetryAfter = ledger.ConcurrencyRetryAfter
		}
		return e
	case ledger.ReasonRateLimitExceeded:
		e := apierr.New(apierr.RateLimitExceeded, "The account's requests-per-minute limit is exceeded.")
		e.RetryAfter = ref.RetryAfter
		return e
	}
	r.log().Warn("unexpected refusal", zap.String("op", op), zap.Stringer("reason", ref.Reason))
	return apierr.New(apierr.InternalError, "The request could not be processed.")
}

func limitName(l string) string {
	if l == "daily" || l == "monthly" {
		return l + " "
	}
	return ""
}

// RequestBodyBuffered records that Envoy sends this request's body BUFFERED (the
// request_body_mode of the protocol_config in the stream's first message). Envoy then
// sends one body message with the whole body; when the request has trailers (HTTP/2)
// that message comes with end_of_stream false, because the trailers are the end of the
// stream (ext_proc.cc Filter::onTrailers sends the buffered data then; with
// request_trailer_mode SKIP nothing follows it). Such a body is whole and is accepted.
func (r *Request) RequestBodyBuffered() { r.bufferedBody = true }

func (r *Request) requestBody(ctx context.Context, body []byte, endOfStream bool) Action {
	if len(body) > wire.MaxBodyBytes {
		return r.fail(tooLarge())
	}
	if !endOfStream && !r.bufferedBody {
		// The request body mode must be BUFFERED (one message with the whole body):
		// a streamed chunk cannot be validated or rewritten. Fail closed. (A BUFFERED
		// body comes without end_of_stream when request trailers follow: see
		// RequestBodyBuffered.)
		r.log().Error("request body arrived in chunks: configure request_body_mode BUFFERED")
		return r.fail(apierr.New(apierr.InternalError, "The request could not be processed."))
	}
	parse := r.endpoint.spec().parse
	if parse == nil {
		return Action{}
	}
	if !utf8.Valid(body) {
		// JSON is UTF-8 (RFC 8259 section 8.1); providers' parsers differ on what they
		// make of a bad byte (replace, refuse), so the estimate could price another text.
		return r.fail(apierr.New(apierr.InvalidRequest, "The request body is not valid UTF-8."))
	}
	if e := checkJSONShape(body); e != nil {
		return r.fail(e)
	}
	var perr *apierr.Error
	if r.parsed, perr = parse(body); perr != nil {
		return r.fail(perr)
	}
	// The ledger calls of this phase must answer before Envoy's message timeout
	// (budget.go): the client then gets our answer, never Envoy's 504. The context is
	// detached from the stream so that a reservation's reply is never cut half-way.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AdmitBudget)
	defer cancel()
	if e := r.admit(actx); e != nil {
		return r.fail(e)
	}
	if e := r.modelRules(actx); e != nil {
		return r.fail(e)
	}
	if r.endpoint == EndpointCountTokens {
		n := r.promptTokens()
		return Action{Immediate: &Immediate{
			Status:  200,
			Headers: []Header{{"content-type", "application/json"}},
			Body:    []byte(`{"input_tokens":` + strconv.FormatInt(n, 10) + `}`),
			Details: "extproc_count_tokens",
		}}
	}
	// The rewrite comes before the hold: Envoy's buffer limit applies to the mutated
	// body (ENVOY-EXTPROC.md, Mutations), so a body the rewrite grows past 2 MiB (a longer
	// upstream model id, stream_options added) is refused here with our 413 rather than
	// by Envoy after credits were held.
	a, err := r.mutate(body)
	if u := (*translate.Unsupported)(nil); errors.As(err, &u) {
		r.channel, r.xlate = nil, nil
		return r.fail(apierr.Param(apierr.InvalidRequest, u.Param, u.Message))
	}
	if err != nil {
		r.channel, r.xlate = nil, nil
		r.log().Error("request mutation failed", zap.Error(err))
		return r.fail(apierr.New(apierr.InternalError, "The request could not be processed."))
	}
	if len(a.Body) > wire.MaxBodyBytes {
		r.channel = nil
		return r.fail(tooLarge())
	}
	if e := r.reserve(actx); e != nil {
		r.channel = nil
		return r.fail(e)
	}
	r.sent = true
	return a
}

// admit runs steps 3 to 10 of the admission order (see the package doc).
func (r *Request) admit(ctx context.Context) *apierr.Error {
	if e := r.authenticate(ctx); e != nil {
		return e
	}
	g := &r.grant
	if g.AccountSuspended {
		return apiAccountSuspended()
	}
	id := r.parsed.Model
	m, ok := r.svc.cfg.Catalog.Model(id)
	if !ok || !r.endpoint.spec().serves(m.Kind) {
		return apierr.Param(apierr.ModelNotAvailable, "model", "The model '"+id+"' is not available on this endpoint.")
	}
	r.model = m
	if e := modelRefusal(g, m, len(r.candidates()) > 0); e != nil {
		return e
	}
	if f := r.parsed.Unpriced; f != "" && r.endpoint != EndpointCountTokens {
		return apierr.Param(apierr.PricingUnavailable, f,
			"'"+f+"' asks for server-side tools that have no published price on this gateway; use client-side (function) tools.")
	}
	if f := r.parsed.Prompt.Unbounded; f != "" && r.endpoint != EndpointCountTokens {
		return apierr.Param(apierr.PricingUnavailable, f,
			"'"+f+"' refers to content the request does not carry (a URL, a file id, an earlier answer), so its cost cannot be bounded before the provider fetches it; send the content itself (base64 bytes or text).")
	}
	if r.parsed.MaxOutput > m.MaxOutputTokens && r.endpoint != EndpointCountTokens {
		return apierr.Param(apierr.InvalidMaxTokens, r.parsed.MaxOutputParam,
			"'"+r.parsed.MaxOutputParam+"' is too large: the model '"+id+"' supports at most "+strconv.FormatInt(m.MaxOutputTokens, 10)+" output tokens.")
	}
	return nil
}

// modelRefusal is the first of the model rules of the admission order (steps 6 to 9)
// that the grant fails for model m — allowlist, top-up, a channel open to the tier
// (hasCandidate), a complete price — or nil when it may call m. Admission and the
// models list share it, so the list shows exactly what admission would let through.
func modelRefusal(g *ledger.Grant, m *catalog.Model, hasCandidate bool) *apierr.Error {
	switch {
	case len(g.AllowedModels) > 0 && !slices.Contains(g.AllowedModels, m.ID):
		return apierr.Param(apierr.ModelNotAllowed, "model", "This key is not allowed to call the model '"+m.ID+"'.")
	case !m.Free && !g.AccountToppedUp:
		return apierr.Param(apierr.ModelRequiresTopUp, "model", "The model '"+m.ID+"' requires a top-up; free models remain callable.")
	case !hasCandidate:
		return apierr.Param(apierr.ModelNotAvailable, "model", "No route for the model '"+m.ID+"' is available to this key.")
	case !m.PriceComplete():
		return apierr.Param(apierr.PricingUnavailable, "model", "No complete published price exists for the model '"+m.ID+"'.")
	}
	return nil
}

// candidates are the admitted model's channels open to the key's tier (and, for
// multimodal embeddings, only the channels that serve them).
func (r *Request) candidates() []*catalog.Channel {
	cs := r.model.Candidates(r.grant.Tier)
	if r.endpoint != EndpointEmbeddingsMultimodal {
		return cs
	}
	out := cs[:0]
	for _, c := range cs {
		if c.MultimodalEmbeddings {
			out = append(out, c)
		}
	}
	return out
}

// modelRules applies the endpoint's rules that need the model (step 10 of the
// admission order): a speech voice the model lists; a video duration inside the model's
// range, its resolution tier, and a webhook URL whose host resolves to public
// addresses. The webhook is resolved only here, after the key was accepted, so that
// unauthenticated callers cannot make the gateway resolve names.
func (r *Request) modelRules(ctx context.Context) *apierr.Error {
	switch r.endpoint {
	case EndpointSpeech:
		if !slices.Contains(r.model.Voices, r.parsed.Voice) {
			return apierr.Param(apierr.InvalidRequest, "voice",
				"The voice '"+truncate(r.parsed.Voice, 64)+"' is not supported by the model '"+r.model.ID+"'; use one of: "+strings.Join(r.model.Voices, ", ")+".")
		}
		r.units = r.parsed.Units
	case EndpointImages:
		r.units = r.parsed.Units
	case EndpointVideoSubmit:
		d, e := video.Admit(r.parsed.Video, r.model)
		if e != nil {
			return e
		}
		r.units = d
		if u := r.parsed.Video.WebhookURL; u != "" {
			if e := r.svc.cfg.Webhooks.Check(ctx, u); e != nil {
				return e
			}
		}
	}
	return nil
}

// MaxCost is the request's maximum estimated cost in micro-credits. Token kinds: the
// prompt's estimate times the input price plus the output limit (the request's, else
// the model's) and what is billed as output beyond it (prediction) times the output
// price, each rounded up. Embeddings: the input's
// estimate (token ids counted exactly) times the input price. Speech: the exact cost of
// its characters. Images and video: units times the unit price. Free models cost 0.
func (r *Request) MaxCost() int64 {
	m := r.model
	if m == nil || m.Free {
		return 0
	}
	switch m.Kind {
	case catalog.KindEmbeddings:
		known := r.parsed.KnownTokens
		return tokens.Cost(tokens.WithMargin(r.promptTokens()-known, tokens.Media(r.parsed.Prompt))+known, deref(m.Prices.InputPerMTok))
	case catalog.KindSpeech, catalog.KindImage, catalog.KindVideo:
		return r.unitCost(r.units)
	}
	out := r.parsed.MaxOutput
	if out == 0 {
		out = m.MaxOutputTokens
	}
	out += r.svc.cfg.Counter.Output(r.parsed.Prompt)
	return tokens.Cost(tokens.WithMargin(r.promptTokens(), tokens.Media(r.parsed.Prompt)), deref(m.Prices.InputPerMTok)) +
		tokens.Cost(out, deref(m.Prices.OutputPerMTok))
}

// unitCost is the price of n units of a per-unit model: characters per million,
// images and seconds each.
func (r *Request) unitCost(n int64) int64 {
	m := r.model
	if m.Free {
		return 0
	}
	switch m.Kind {
	case catalog.KindSpeech:
		return tokens.Cost(n, deref(m.Prices.PerMillionChars))
	case catalog.KindImage:
		return n * deref(m.Prices.PerImage)
	case catalog.KindVideo:
		return n * deref(m.Prices.PerSecond)
	}
	return 0
}

// promptTokens is the prompt's plain count (no margin), counted once per request.
// Embedding inputs have no message framing: their count is the texts' tokens, media
// parts at their fixed bound, and the token ids given.
func (r *Request) promptTokens() int64 {
	if r.counted < 0 {
		p := r.parsed.Prompt
		if r.endpoint.spec().billing == BillInputTokens {
			n := r.parsed.KnownTokens + tokens.Media(p)
			for _, t := range p.Texts {
				n += int64(r.svc.cfg.Counter.Text(t))
			}
			r.counted = n
		} else {
			r.counted = r.svc.cfg.Counter.Count(p)
		}
	}
	return r.counted
}

// knownPromptTokens is what an early end charges for the prompt (settlement policy): the
// parts counted as the provider counts them (tokens.Known; for embeddings the texts and
// the token ids given), never the bounds of media, tools prompt or margin that the hold
// carries.
func (r *Request) knownPromptTokens() int64 {
	p := r.parsed.Prompt
	if r.endpoint.spec().billing == BillInputTokens {
		n := r.parsed.KnownTokens
		for _, t := range p.Texts {
			n += int64(r.svc.cfg.Counter.Text(t))
		}
		return n
	}
	return r.svc.cfg.Counter.Known(p)
}

func (r *Request) reserve(ctx context.Context) *apierr.Error {
	pool := ledger.PoolGeneral
	if r.model.HighCost {
		pool = ledger.PoolHighCost
	}
	// ctx carries the admission budget and no cancellation (RequestBody). A reply lost
	// in transit is retried with the same request id, which accounting answers with the
	// same reservation, so a hold is never made twice. When no answer came within the
	// budget, the client is told to retry and the request id is abandoned: whatever
	// hold it made is found and released in the background.
	req := ledger.ReserveRequest{
		RequestID: r.svc.cfg.NewID(),
		KeyID:     r.grant.KeyID,
		Model:     r.model.ID,
		Amount:    r.MaxCost(),
		Pool:      pool,
		TTL:       r.svc.cfg.LeaseTTL,
	}
	start := time.Now()
	deadline, _ := ctx.Deadline()
	var res ledger.Reservation
	err := r.svc.retry(func() time.Time { return deadline }, func(actx context.Context) error {
		actx, cancel := context.WithDeadline(actx, deadline)
		defer cancel()
		var err error
		res, err = r.svc.cfg.Ledger.Reserve(r.traceCtx(actx), req)
		return err
	})
	if err != nil {
		if !final(err) {
			r.svc.abandonReserve(req, r.log())
		}
		return r.ledgerError(err, "reserve")
	}
	r.reservation = &res
	r.hold = r.svc.newHold(res, start, r.log())
	return nil
}

// mutate picks the channel and rewrites the request for it: translated into the
// channel's API when the client speaks another (translation.go), else edited in place
// (the model id, and stream usage on a chat stream), every other byte kept. The error is
// a *translate.Unsupported when a field cannot be carried to the channel's API.
func (r *Request) mutate(body []byte) (Action, error) {
	ch := catalog.Pick(r.candidates(), r.svc.cfg.Intn)
	if ch == nil {
		return Action{}, errors.New("no candidate channel after admission")
	}
	r.channel = ch
	path, body, err := r.translateRequest(body)
	if err != nil {
		return Action{}, err
	}
	if r.xlate == nil {
		switch ch.Format {
		case catalog.FormatAnthropic:
			body, err = anthropic.SetModel(body, ch.UpstreamModel)
		default:
			body, err = openai.SetModel(body, ch.UpstreamModel)
			if err == nil && r.endpoint == EndpointChat && r.parsed.Stream && !r.parsed.IncludeUsage {
				body, err = openai.ForceIncludeUsage(body)
			}
		}
		if err != nil {
			return Action{}, err
		}
	}
	a := Action{
		Body:            body,
		ReplaceBody:     true,
		ClearRouteCache: true,
		SetHeaders: []Header{
			{"content-length", strconv.Itoa(len(body))},
			{RoutingHeader, ch.Cluster},
			identityEncoding,
		},
	}
	if path != "" {
		a.SetHeaders = append(a.SetHeaders, Header{":path", path})
	}
	if ch.Format == catalog.FormatAnthropic {
		a.SetHeaders = append(a.SetHeaders, Header{"x-api-key", ch.Credential()})
		// The client's anthropic-version reached here only from an Anthropic endpoint
		// (RequestHeaders removes it from the others).
		if !r.clientVersion || r.env != apierr.Anthropic {
			a.SetHeaders = append(a.SetHeaders, Header{"anthropic-version", AnthropicVersion})
		}
		a.RemoveHeaders = []string{"authorization"}
	} else {
		a.SetHeaders = append(a.SetHeaders, Header{"authorization", "Bearer " + ch.Credential()})
		a.RemoveHeaders = []string{"x-api-key"}
		if r.clientVersion && r.env == apierr.Anthropic {
			a.RemoveHeaders = append(a.RemoveHeaders, "anthropic-version")
		}
	}
	return a, nil
}

// identityEncoding asks an upstream for an uncompressed answer. Envoy forwards the
// client's accept-encoding (the SDKs send gzip) and providers honour it; the rewriter
// reads the answer's bytes, and an answer extproc does not rewrite (speech audio) goes
// to the client as is, so it must not carry an encoding the client never accepted. A
// provider that compresses anyway is decoded (see ResponseHeaders).
var identityEncoding = Header{"accept-encoding", "identity"}

// release returns the hold, once, after the reply (budget.go).
func (r *Request) release(_ context.Context, reason string) {
	if r.reservation == nil || r.settled {
		return
	}
	r.settled = true
	r.verdict = verdict{outcome: OutcomeRelease}
	id := r.reservation.ID
	record := r.settledRecord(ledger.Usage{})
	sp := r.traceSettlement("release")
	r.svc.settle(r.hold, func(ctx context.Context) error {
		_, err := r.svc.cfg.Ledger.Release(sp.ctx(ctx), id, reason)
		return err
	}, func(err error) {
		sp.end("released", 0, err)
		if err != nil {
			// The hold expires server-side at the end of its lease.
			r.log().Warn("release failed", zap.String("reservation", id), zap.Error(err))
			return
		}
		r.log().Info("settled", append(record, zap.String("outcome", "released"),
			zap.Int64("charged_micros", 0), zap.String("reason", reason))...)
	})
}

// commit charges the actual cost of token usage, once.
func (r *Request) commit(ctx context.Context, in, out int64) {
	in, out = clampUsage(in), clampUsage(out)
	m := r.model
	var actual int64
	if !m.Free {
		actual = tokens.Cost(in, deref(m.Prices.InputPerMTok)) + tokens.Cost(out, deref(m.Prices.OutputPerMTok))
	}
	r.charge(ctx, actual, ledger.Usage{InputTokens: in, OutputTokens: out})
}

// commitUnits charges n units of a per-unit endpoint ("characters", "images",
// "seconds"), once.
func (r *Request) commitUnits(ctx context.Context, unit string, n int64) {
	r.charge(ctx, r.unitCost(n), ledger.Usage{Units: map[string]int64{unit: n}})
}

// charge commits actual with its usage record, once, after the reply (budget.go).
func (r *Request) charge(_ context.Context, actual int64, u ledger.Usage) {
	if r.reservation == nil || r.settled {
		return
	}
	r.settled = true
	// Accounting charges the hold at most (Capped).
	r.verdict = verdict{outcome: OutcomeCommit, charge: min(actual, r.reservation.Amount), usage: u}
	cr := ledger.CommitRequest{
		ReservationID: r.reservation.ID,
		Actual:        actual,
		Usage:         u,
		UpstreamModel: r.channel.UpstreamModel,
		Channel:       r.channel.Name,
	}
	record := r.settledRecord(u)
	var res ledger.CommitResult
	sp := r.traceSettlement("commit")
	r.svc.settle(r.hold, func(ctx context.Context) error {
		var err error
		res, err = r.svc.cfg.Ledger.Commit(sp.ctx(ctx), cr)
		return err
	}, func(err error) {
		sp.end("committed", res.Charged, err)
		if err != nil {
			r.log().Error("commit failed", zap.String("reservation", cr.ReservationID), zap.Error(err))
			return
		}
		r.log().Info("settled", append(record, zap.String("outcome", "committed"),
			zap.Int64("charged_micros", res.Charged), zap.Int64("actual_micros", actual), zap.Bool("capped", res.Capped))...)
	})
}

// settledRecord is the one record of a request's money, but its outcome and charge: who,
// what, usage and hold (the request id comes with r.log). It never carries a secret: keys appear by id only. It is built
// on the request's goroutine; the settlement logs it when it has landed.
func (r *Request) settledRecord(u ledger.Usage) []zap.Field {
	var channel, upstream string
	if r.channel != nil {
		channel, upstream = r.channel.Name, r.channel.UpstreamModel
	}
	return []zap.Field{
		zap.String("reservation", r.reservation.ID),
		zap.String("account", r.grant.AccountID),
		zap.String("key_id", r.grant.KeyID),
		zap.String("model", r.model.ID),
		zap.String("upstream_model", upstream),
		zap.String("channel", channel),
		zap.Int64("input_tokens", u.InputTokens),
		zap.Int64("output_tokens", u.OutputTokens),
		zap.Any("units", u.Units),
		zap.Int64("hold_micros", r.reservation.Amount),
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// End finishes the request and settles what was not, by the settlement policy
// (decideEnd): the provider's usage if it came, else what a stream delivered, else the
// prompt once the request reached the provider, else nothing. cause says why the stream
// ended, for the record ("stream_closed", ...). Safe to call more than once.
func (r *Request) End(ctx context.Context, cause string) {
	defer r.traceEnd(cause)
	if r.resp != nil && r.resp.dec != nil {
		r.resp.dec.Close()
	}
	if r.reservation == nil || r.settled {
		return
	}
	// Whatever happens below (a panic included), the hold is never kept alive past
	// this point without a settlement: its lease then frees it.
	defer func() {
		if !r.settled {
			r.hold.end()
		}
	}()
	f := endFacts{Sent: r.sent, Tokens: r.tokenPriced(), ClientLeft: cause == CauseClientLeft}
	if st := r.resp; st != nil {
		f.Failed = st.rw == nil || st.broken && !r.parsed.Stream
		if st.rw != nil {
			_, f.Usage = st.rw.Usage()
			f.Delivered = st.chunked && r.parsed.Stream && st.delivered
		}
	}
	rule := decideEnd(f)
	if rule != endRelease {
		r.log().Info("request ended before its answer did: charging by the settlement policy",
			zap.String("cause", cause), zap.Stringer("rule", rule))
	}
	switch rule {
	case endUsage, endDelivered:
		r.settleStream(ctx)
	case endPrompt:
		r.commit(ctx, r.knownPromptTokens(), 0)
	default:
		r.release(ctx, cause)
	}
}

// tokenPriced reports whether the endpoint is priced by tokens.
func (r *Request) tokenPriced() bool {
	b := r.endpoint.spec().billing
	return b == BillTokens || b == BillInputTokens
}

func apiAccountSuspended() *apierr.Error {
	return apierr.New(apierr.AccountSuspended, "The account is suspended.")
}

// maxUsage bounds a usage count taken from an upstream: beyond it the number is not a
// real count, and the charge is capped at the hold anyway.
const maxUsage = 1 << 40

// clampUsage turns an upstream's usage count into one that prices safely: negative
// counts are zero, absurd ones are maxUsage (so the cost never overflows).
func clampUsage(n int64) int64 {
	return min(max(n, 0), maxUsage)
}
