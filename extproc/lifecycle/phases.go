package lifecycle

// The five phases of a request, in the order Envoy's ext_proc filter calls them, and the
// state they share. Each phase method is a thin wrapper: the work lives in the file of
// its stage (admit.go, route.go, response.go, settle.go).

import (
	"context"
	"crypto/sha256"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/response"
	"github.com/llmgw/gateway/extproc/tokens"
	"github.com/llmgw/gateway/extproc/translate"
	"github.com/llmgw/gateway/extproc/wire"
)

// Request is one HTTP request's lifecycle. Not safe for concurrent use. Its fields are
// grouped by the stage that sets them.
type Request struct {
	svc *Service
	// cat is the catalog this request lives by (read once, at its start).
	cat *catalog.Catalog

	// Request headers: what the client asked for.
	endpoint      Endpoint
	env           apierr.Envelope
	contentLength int64
	// upstreamPath is :path without the client's query string, set when one was sent.
	upstreamPath string
	// path is the client's :path without its query (what goes upstream unless the
	// channel's API has another); authority its :authority (credential.go).
	path, authority string
	clientVersion   bool   // the client sent anthropic-version
	requestID       string // Envoy's x-request-id, for the record
	// addr is the client's address as Envoy reports it ("" when unknown).
	addr string
	tr   *reqTrace
	// bufferedBody: Envoy said (protocol_config) it sends the request body BUFFERED, so
	// its one body message is the whole body, with or without end_of_stream.
	bufferedBody bool

	// The key and what it may do.
	hasKey      bool
	keyOK       bool // the presented key has the gateway key shape
	keyConflict bool // Authorization and x-api-key carry different keys
	keyHash     [sha256.Size]byte
	grant       ledger.Grant

	// Admission: the body, the model and its price.
	parsed  wire.Parsed
	counted tokens.Tally // the prompt's counts; Bound -1 until counted
	model   *catalog.Model
	units   int64 // billed units of a per-unit endpoint (characters, images, seconds)

	// Routing.
	channel *catalog.Channel
	// xlate translates between the client's chat API and the channel's, when they differ
	// (translation.go); nil otherwise.
	xlate *translate.Translator
	// fo is a failover request's attempts (failover.go); nil otherwise.
	fo *failover
	// proxied: the request was routed upstream without a reservation (video task
	// reads); its response is rewritten but never settled.
	proxied bool
	// taskID is the gateway's id of the video task a GET reads: the upstream's answer
	// carries the provider's id, which is replaced by this one.
	taskID string

	// The hold and its settlement.
	reservation *ledger.Reservation
	hold        *hold // kept (renewed) until settled
	// sent: the request was let through to the provider (settlement.go).
	sent    bool
	settled bool
	// settlement is the hold's settlement, decided before a reply (settle.go); landed
	// is what the ledger answered it, written by its background call (record.go).
	settlement Settlement
	landed     landed
	// abandoned is the settlement of a hold a reservation abandoned past the admission
	// budget made after all (abandonReserve), written by its background call.
	abandoned *Settlement

	// The response.
	resp *responseState

	// What the replies told: the API error code extproc answered with, and the Facts the
	// last reply carried (facts.go).
	failed   apierr.Code
	reported Facts
	// reply is how the client was answered (record.go), timing when (record.go).
	reply  Reply
	timing Timing

	// open counts the parts of the request still running: its stream until End, and
	// its background ledger calls. The last to end hands the record over (record.go).
	open atomic.Int32
	// ended: End ran.
	ended bool
}

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
		r.replied(a, false)
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

// RequestBody handles the buffered request body: validation, admission, reservation,
// channel choice and mutation (requestBody), inside the admission span.
func (r *Request) RequestBody(ctx context.Context, body []byte, endOfStream bool) Action {
	a := r.requestBody(r.traceCtx(ctx), body, endOfStream)
	r.traceAdmitted(a.Immediate != nil)
	r.replied(a, false)
	return r.withFacts(a)
}

// ResponseHeaders handles the upstream's response headers (responseHeaders).
func (r *Request) ResponseHeaders(ctx context.Context, status int, headers []Header, endOfStream bool) Action {
	r.adoptWinner()
	a := r.responseHeaders(ctx, status, headers, endOfStream)
	r.reply.Answered, r.reply.UpstreamStatus = true, status
	r.reply.Streamed = r.reply.Streamed || a.Immediate == nil && a.ResponseBodyMode == ModeStreamed
	r.replied(a, true)
	return r.withFacts(a)
}

// ResponseBody handles a response body message (responseBody).
func (r *Request) ResponseBody(ctx context.Context, chunk []byte, endOfStream bool) Action {
	a := r.responseBody(ctx, chunk, endOfStream)
	r.timeChunk(len(chunk), endOfStream)
	r.reply.Complete = r.reply.Complete || endOfStream
	r.replied(a, true)
	return r.withFacts(a)
}

// End finishes the request and settles what was not, by the settlement policy
// (decideEnd): the provider's usage if it came, else what a stream delivered, else the
// prompt once the request reached the provider, else nothing. cause says why the stream
// ended, for the record ("stream_closed", ...). Safe to call more than once: the first
// call ends the request's stream, and the request's record is handed to the observers
// once its settlement, if any, has landed (record.go).
func (r *Request) End(ctx context.Context, cause string) {
	if r.ended {
		return
	}
	r.ended = true
	r.timing.End = time.Now()
	// Deferred first, so it runs last: after the settlement was decided and the trace
	// ended, and also after a panic.
	defer r.endPart()
	defer r.traceEnd(cause)
	defer r.endFailover()
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
	// A failover request whose answer went on but whose response phases never ran (the
	// client left first) settles on that attempt's channel.
	r.adoptWinner()
	f := endFacts{Sent: r.reachedProvider(), Tokens: r.tokenPriced(), ClientLeft: cause == CauseClientLeft}
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
		r.commit(ctx, response.Usage{InputTokens: r.knownPromptTokens()})
	default:
		r.release(ctx, cause)
	}
}
