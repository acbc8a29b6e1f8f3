package lifecycle

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/health"
	"github.com/llmgw/gateway/extproc/tokens"
	"github.com/llmgw/gateway/extproc/translate"
	"github.com/llmgw/gateway/extproc/webhook"
	"github.com/llmgw/gateway/extproc/wire"
	"github.com/llmgw/gateway/internal/workers"
)

// MaxLoggedRequestID bounds the x-request-id kept for the settlement record: the header
// can come from the client.
const MaxLoggedRequestID = 128

// RoutingHeader carries the Envoy cluster the request goes to (the route's
// cluster_header).
const RoutingHeader = "x-gateway-upstream"

// AnthropicVersion is sent upstream when the client sent no anthropic-version.
const AnthropicVersion = "2023-06-01"

// Config wires a Service. Catalog (or Source), Ledger and Counter are required.
type Config struct {
	Catalog *catalog.Catalog
	// Source, when set, is the live catalog (reloaded while serving) and Catalog is
	// ignored: each request reads it once, at its start, and keeps that catalog — its
	// model, channel and prices — for its whole life.
	Source  *catalog.Source
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
	// ObserveAuthFailure is told how each request whose key failed was answered:
	// invalid_api_key (401) or rate_limit_exceeded (429, AuthFailures). Nop when nil.
	ObserveAuthFailure func(apierr.Code)
	// Health is the channels' health on this replica (routing skips cooling channels);
	// a Tracker with the default cooldowns when nil.
	Health *health.Tracker
	// Log receives lifecycle events; never a key. Nop when nil. Each settlement is
	// logged from its request's Record ("settled", settlelog.go).
	Log *zap.Logger
	// Observers hear each hold and each request's Record (record.go), after the
	// settlement log.
	Observers []Observer
	// Failover routes chat requests to their failover clusters, whose upstream ext_proc
	// makes each attempt through StartAttempt (failover.go); the catalog's clusters must
	// then include them (extproc/xds).
	Failover bool
}

// Service creates Requests. Safe for concurrent use.
type Service struct {
	cfg   Config
	fails *failLimiter
	// observers are the settlement log and cfg.Observers.
	observers []Observer
	// pending counts the background work that outlives a stream: settlements and
	// abandoned reservations (WaitSettled).
	pending background
	// settling counts the settlements' retries (SettleStats).
	settling settleCounts
	// attempting holds the failover requests in flight by x-request-id, for their
	// attempts' streams (StartAttempt).
	attempting sync.Map
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Source == nil && cfg.Catalog != nil {
		cfg.Source = catalog.NewSource(cfg.Catalog, "")
	}
	if cfg.Source == nil || cfg.Ledger == nil || cfg.Counter == nil {
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
	if cfg.Health == nil {
		cfg.Health = health.New(health.Config{})
	}
	if cfg.ObserveAuthFailure == nil {
		cfg.ObserveAuthFailure = func(apierr.Code) {}
	}
	observers := append([]Observer{settleLog{cfg.Log}}, cfg.Observers...)
	return &Service{cfg: cfg, fails: newFailLimiter(cfg.AuthFailures), observers: observers}, nil
}

// backgroundWork runs the background work of every Service of the process (settlements,
// abandoned reservations, late task records) on kept goroutines: a settlement's call
// goes deep, and a new goroutine for each grew its stack every time. More of it at once
// runs on goroutines of its own.
var backgroundWork = workers.New(64)

func randomID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NewRequest starts the lifecycle of one HTTP request.
func (s *Service) NewRequest() *Request {
	r := &Request{svc: s, contentLength: -1, counted: tokens.Tally{Bound: -1}, cat: s.cfg.Source.Current()}
	r.timing.Start = time.Now()
	r.open.Store(1) // the stream, until End
	return r
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

func (r *Request) requestHeaders(ctx context.Context, headers []Header, endOfStream bool) Action {
	var method, path, auth, xKey string
	twoKeys := false // a key header repeated with another value
	for _, h := range headers {
		switch h.Name {
		case ":method":
			method = h.Value
		case ":path":
			path = h.Value
		case ":authority":
			r.authority = h.Value
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
	r.path = path
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
	r.readKey(auth, xKey)
	if twoKeys {
		// Served on either copy, the request would be billed to a key the client may not
		// have meant (Envoy hands every copy of a repeated header over in order).
		r.hasKey, r.keyConflict, r.keyOK = true, true, false
	}
	// An address that used up its failed keys: a key that would fail is refused here,
	// before the body is buffered or accounting is asked (AuthFailures).
	if d := r.svc.fails.admit(r.keyAttempt(), !sp.keyOptional, r.svc.cfg.Now()); d > 0 {
		r.svc.cfg.ObserveAuthFailure(apierr.RateLimitExceeded)
		return r.fail(tooManyFailures(d))
	}
	if answer := sp.headers; answer != nil {
		return answer(r, ctx, taskID)
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

// rewriteTooLarge refuses a body within the client's limit whose rewrite for the
// model's channel would not fit Envoy's buffer (EnvoyBufferLimit): only a translation
// can grow a body that much.
func rewriteTooLarge() *apierr.Error {
	return apierr.New(apierr.RequestBodyTooLarge, "The request body, translated for this model's provider, exceeds the gateway's buffer; send a smaller body.")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
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
	if answer := r.endpoint.spec().estimate; answer != nil {
		return answer(r)
	}
	// The rewrite comes before the hold. The 2 MiB rule is about the client's bytes
	// (checked above); Envoy's buffer limit, twice that, applies to the mutated body
	// (EnvoyBufferLimit), so a rewrite that would not fit it is refused here with our
	// 413 rather than by Envoy after credits were held.
	a, err := r.mutate(body)
	if n := (*noChannel)(nil); errors.As(err, &n) {
		r.channel = nil
		return r.fail(upstreamError(n.code))
	}
	if errors.Is(err, errRewriteTooLarge) {
		r.channel, r.xlate = nil, nil
		return r.fail(rewriteTooLarge())
	}
	if u := (*translate.Unsupported)(nil); errors.As(err, &u) {
		r.channel, r.xlate = nil, nil
		return r.fail(apierr.Param(apierr.InvalidRequest, u.Param, u.Message))
	}
	if err != nil {
		r.channel, r.xlate = nil, nil
		r.log().Error("request mutation failed", zap.Error(err))
		return r.fail(apierr.New(apierr.InternalError, "The request could not be processed."))
	}
	if len(a.Body) > EnvoyBufferLimit {
		r.channel = nil
		return r.fail(rewriteTooLarge())
	}
	if e := r.reserve(actx); e != nil {
		r.channel = nil
		return r.fail(e)
	}
	r.sent = true
	return a
}
