package lifecycle

import (
	"context"
	"errors"
	"mime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/response"
	"github.com/llmgw/gateway/extproc/translate"
	"github.com/llmgw/gateway/extproc/video"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"
)

// responseState is the response side of an admitted (or proxied) request.
//
// A usable success (2xx with the media type asked for) is rewritten by extproc/response:
// the public model id is written back and usage read. How the body travels depends on
// the endpoint:
//
//   - SSE streams (chat, messages, responses with stream true): STREAMED, event by event.
//   - Embeddings and images: STREAMED too, rewritten incrementally so that a large body
//     is never held (content-length removed in both cases).
//   - Other JSON (chat, messages, responses): BUFFERED when content-length says the
//     body is well below Envoy's buffer limit (EnvoyBufferLimit), else STREAMED and
//     rewritten incrementally like embeddings; a compressed body's decoded size is
//     unknown, so it streams. Video tasks: BUFFERED (small task objects).
//   - Speech audio: NONE — the binary body bypasses extproc; it is charged on the
//     headers (the exact cost of the input's characters was held).
//
// Anything else is buffered, classified by response.ClassifyUpstream and replaced by our
// envelope (the provider's message is never shown), and the hold is released.
//
// Settlement: upstream usage → commit its cost. A stream that ended without usage (cut,
// client gone) → commit what was delivered, counted locally (input as counted, output
// text as sent). A JSON body without usage → release: it cannot be priced, and the full
// hold is never charged. Images: one image on a body whose data has an item. Video: the
// held seconds once the upstream returned a task id and accounting recorded it.
type responseState struct {
	status    int
	ct        string
	errType   string // the answer's response.ErrorTypeHeader (Bedrock's error type)
	rw        response.Rewriter
	chunked   bool // the body comes in STREAMED chunks (SSE or incremental JSON)
	delivered bool // some bytes of a chunked success went downstream
	broken    bool // the rewriter failed mid-body; later chunks are dropped
	encoding  string
	dec       *response.Decoder // the upstream compressed the body anyway: decoded before rewriting
	xs        *translate.Stream // a translated stream (translation.go)
	// norm turns an upstream-only API's answer into the bytes rw reads (translation.go).
	norm *translate.Normalizer
}

// format is the response format of the answer the client gets.
func (r *Request) format() response.Format { return r.endpoint.spec().format }

// awaiting reports whether the response still matters: an unsettled reservation, or a
// proxied read.
func (r *Request) awaiting() bool {
	return (r.reservation != nil && !r.settled) || r.proxied
}

// responseHeaders handles the upstream's response headers (or Envoy's own local reply
// when no upstream answered). endOfStream says no body follows: then no body message
// will come either, so a response that needs one is answered here.
func (r *Request) responseHeaders(ctx context.Context, status int, headers []Header, endOfStream bool) Action {
	if !r.awaiting() {
		return Action{}
	}
	st := &responseState{status: status}
	r.resp = st
	var private []string
	size := int64(-1) // the body's length when content-length says it
	for _, h := range headers {
		switch h.Name {
		case "content-type":
			st.ct = h.Value
		case "content-encoding":
			st.encoding = h.Value
		case response.ErrorTypeHeader:
			st.errType = h.Value
		case "content-length":
			if n, err := strconv.ParseInt(h.Value, 10, 64); err == nil && n >= 0 {
				size = n
			}
		}
		if providerAccountHeader(h.Name) && !slices.Contains(private, h.Name) {
			private = append(private, h.Name)
		}
	}
	if endOfStream {
		// Every endpoint's answer has a body: an error status without one is classified
		// on its status alone, and a bodiless success is unusable. Either way the hold is
		// released and the client gets our envelope, never the upstream's bare status.
		r.release(ctx, "upstream_no_body")
		r.proxied = false
		if r.endpoint.spec().taskRead && status == 404 {
			return r.fail(taskNotFound())
		}
		code := apierr.UpstreamError
		if status < 200 || status > 299 {
			code = response.ClassifyUpstream(r.upstreamFormat(), status, st.ct, st.errType, nil)
		}
		r.reportHealth(status, code, nil)
		return r.fail(upstreamError(r.failoverCode(code)))
	}
	if status < 200 || status > 299 {
		// Buffer the error body so it can be classified before anything reaches the
		// client (decoded first when the upstream compressed it; an unknown encoding is
		// classified on the status alone).
		if !response.Identity(st.encoding) {
			st.dec, _ = response.NewDecoder(st.encoding, response.MaxBodySize)
		}
		return Action{ResponseBodyMode: ModeBuffered}
	}
	if settle := r.endpoint.spec().proxied; settle != nil {
		return settle(r, ctx, st, private)
	}
	if !response.UsableSuccess(r.parsed.Stream, status, r.successType(st.ct)) {
		r.release(ctx, "upstream_unusable_response")
		code := response.ClassifyUpstream(r.upstreamFormat(), status, st.ct, st.errType, nil)
		r.reportHealth(status, code, nil)
		return r.fail(upstreamError(code))
	}
	// extproc asked for identity (see mutate); a provider that compresses anyway is
	// decoded, and the client gets the plain body without content-encoding, whatever it
	// accepts. An encoding that cannot be decoded is an unusable answer.
	if !response.Identity(st.encoding) {
		dec, err := response.NewDecoder(st.encoding, decodedChunkLimit)
		if err != nil {
			r.svc.cfg.Log.Warn("upstream answer in an unknown content-encoding", zap.String("encoding", truncate(st.encoding, 64)))
			r.release(ctx, "upstream_unusable_response")
			r.reportHealth(status, apierr.UpstreamError, nil)
			return r.fail(upstreamError(apierr.UpstreamError))
		}
		st.dec = dec
		private = append(private, "content-encoding", "content-length")
		size = -1 // the decoded size is unknown
	}
	// Embeddings and images (b64_json) can be many megabytes, and any JSON answer may
	// exceed Envoy's buffer: a BUFFERED body over the listener's buffer limit is
	// answered by Envoy itself with a 500 (response_payload_too_large) that extproc
	// never sees, after the provider billed the call. So only a body known to be small
	// is buffered; every other one is rewritten as it passes (STREAMED).
	st.chunked = r.parsed.Stream || r.format() == response.OpenAIEmbeddings || r.format() == response.OpenAIImages ||
		r.format() != response.VideoTask && !bufferable(size)
	rw, err := response.New(response.Options{
		Format:      r.upstreamFormat(),
		PublicModel: r.model.ID,
		Stream:      r.parsed.Stream,
		// A translated JSON answer is translated whole: the rewriter hands it over at
		// its end (bounded by MaxBodySize), even when it comes in chunks.
		Incremental: st.chunked && !r.parsed.Stream && r.xlate == nil,
		// A translated stream carries the usage the gateway asked for to the
		// translator, which writes it only where the client's API carries it.
		ClientWantsUsage: r.parsed.IncludeUsage || r.xlate != nil,
		CountTokens:      r.svc.cfg.Counter.Text,
		InputTokens:      r.knownPromptTokens(),
	})
	if err != nil {
		r.log().Error("response rewriter", zap.Error(err))
		r.release(ctx, "internal_error")
		return r.fail(apierr.New(apierr.InternalError, "The response could not be processed."))
	}
	st.rw = rw
	st.norm = r.normalizer()
	r.reportHealth(status, "", nil)
	if st.chunked {
		if !slices.Contains(private, "content-length") {
			private = append(private, "content-length")
		}
		a := Action{ResponseBodyMode: ModeStreamed, RemoveHeaders: private}
		if r.parsed.Stream && st.norm != nil {
			a.SetHeaders = []Header{{"content-type", "text/event-stream"}}
		}
		return a
	}
	return Action{ResponseBodyMode: ModeBuffered, RemoveHeaders: private}
}

// bufferable reports whether a success body of size bytes (-1: unknown) may be asked
// for BUFFERED: its length is known and well below Envoy's buffer limit (half of it,
// a margin for what else the connection buffers).
func bufferable(size int64) bool {
	return size >= 0 && size <= EnvoyBufferLimit/2
}

// decodedChunkLimit bounds the plain bytes one compressed upstream chunk may expand to
// (Envoy's chunks are at most its buffer size; a body that expands further is refused
// rather than held). A buffered body is further bounded by the rewriter's own limit.
const decodedChunkLimit = response.MaxBodySize

// providerAccountHeader reports whether a response header describes the gateway's own
// account at the provider: OpenAI's organization and project ids and x-ratelimit-*,
// Anthropic's organization id and anthropic-ratelimit-*, AWS's x-amzn-* and x-amz-*
// (Bedrock's request id, token counts and latency). They say nothing about the client's
// key and are removed from successes (errors are replaced whole).
func providerAccountHeader(name string) bool {
	switch name {
	case "openai-organization", "openai-project", "anthropic-organization-id":
		return true
	}
	for _, p := range []string{"x-ratelimit-", "anthropic-ratelimit-", "x-amzn-", "x-amz-"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// audioType reports whether a speech response's content type is audio (audio/*, or
// application/octet-stream for raw PCM).
func audioType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (strings.HasPrefix(mt, "audio/") || mt == "application/octet-stream")
}

// responseBody handles a response body message: the whole body (buffered) or one chunk
// (streamed). endOfStream true is the only proof that the response is complete.
func (r *Request) responseBody(ctx context.Context, chunk []byte, endOfStream bool) Action {
	st := r.resp
	if st == nil || !r.awaiting() && !st.broken {
		return Action{}
	}
	if st.rw == nil {
		r.release(ctx, "upstream_status")
		if st.dec != nil {
			// An undecodable error body is classified on its status alone.
			plain, err := st.dec.Write(chunk, true)
			if err != nil {
				plain = nil
			}
			chunk = plain
		}
		code := response.ClassifyUpstream(r.upstreamFormat(), st.status, st.ct, st.errType, chunk)
		if r.endpoint.spec().taskRead && st.status == 404 {
			return r.fail(taskNotFound())
		}
		r.reportHealth(st.status, code, chunk)
		if code = r.failoverCode(code); code == apierr.InvalidRequest {
			return r.fail(r.upstreamRefusal(st.status, chunk))
		}
		return r.fail(upstreamError(code))
	}
	if st.broken {
		// The rewriter failed after the headers went downstream: drop the rest, so the
		// client never sees the upstream's own model id, and let the body end.
		return Action{ReplaceBody: true}
	}
	var out []byte
	var err error
	if st.dec != nil {
		chunk, err = st.dec.Write(chunk, endOfStream)
	}
	if err == nil && st.norm != nil {
		chunk, err = st.norm.Write(chunk, endOfStream)
	}
	if err == nil {
		out, err = st.rw.Write(chunk, endOfStream)
	}
	if err == nil {
		out, err = r.translateBody(out, endOfStream)
	}
	if err != nil {
		if !st.chunked {
			r.release(ctx, "upstream_unusable_response")
			r.reportHealth(st.status, apierr.UpstreamError, nil)
			code := apierr.UpstreamError
			if !errors.Is(err, response.ErrUnusable) && !errors.Is(err, response.ErrTooLarge) && !errors.Is(err, translate.ErrMalformed) {
				code = apierr.InternalError
			}
			return r.fail(upstreamError(code))
		}
		// Headers already went downstream: an immediate response would only reset the
		// stream. Send what the rewriter still returned, drop every later chunk, and
		// settle: a stream on its usage if it already came, else on its counted text; a
		// JSON body that cannot be completed carries no usage and is released.
		r.log().Warn("response rewrite failed mid-body", zap.Error(err))
		st.broken = true
		if len(out) > 0 {
			st.delivered = true
		}
		if r.parsed.Stream {
			r.settleStream(ctx)
		} else {
			r.release(ctx, "upstream_unusable_response")
		}
		return Action{ReplaceBody: true, Body: out}
	}
	if st.chunked {
		if len(out) > 0 {
			st.delivered = true
		}
		if endOfStream {
			switch settle := r.endpoint.spec().settleChunked; {
			case r.parsed.Stream:
				r.settleStream(ctx)
			case settle != nil:
				settle(r, ctx)
			default:
				r.settleUsage(ctx)
			}
		}
		return Action{ReplaceBody: true, Body: out}
	}
	if endOfStream {
		var e *apierr.Error
		if out, e = r.settleBody(ctx, out); e != nil {
			return r.fail(e)
		}
	}
	return Action{ReplaceBody: true, Body: out, SetHeaders: []Header{{"content-length", strconv.Itoa(len(out))}}}
}

// settleBody settles a complete buffered success by endpoint and returns the body to
// send, or the error to answer instead (the hold then released). Images never come
// here: they are rewritten in chunks (see ResponseHeaders) and settled at their end of
// stream.
func (r *Request) settleBody(ctx context.Context, out []byte) ([]byte, *apierr.Error) {
	if settle := r.endpoint.spec().settleJSON; settle != nil {
		return settle(r, ctx, out)
	}
	r.settleUsage(ctx)
	return out, nil
}

// settleVideoRead answers a proxied task read (nothing to settle) with the gateway's
// task id.
func (r *Request) settleVideoRead(_ context.Context, out []byte) ([]byte, *apierr.Error) {
	r.proxied = false
	return withTaskID(out, r.taskID), nil
}

// withTaskID writes the gateway's task id over the provider's "id" in a task object.
// The rewriter has checked the body is a JSON object with a string "id".
func withTaskID(out []byte, id string) []byte {
	if id == "" {
		return out
	}
	b, err := sjson.SetBytes(out, "id", id)
	if err != nil {
		return out
	}
	return b
}

// settleUsage commits the upstream's usage, or releases when there was none.
func (r *Request) settleUsage(ctx context.Context) {
	if u, ok := r.resp.rw.Usage(); ok {
		r.commit(ctx, u)
		return
	}
	r.log().Warn("response without usage: releasing the hold", zap.String("model", r.model.ID))
	r.release(ctx, "usage_unavailable")
}

// settleVideo gives an accepted video task the gateway's own id, records it in
// accounting with the channel and the provider's id (before the response reaches the
// client, so the client can read it at once), charges its seconds and answers with the
// gateway's id. The gateway's id cannot collide: two channels, or a provider that reuses
// ids after a restart, may hand out the same id, and the client's id must still name
// exactly one task (design: the spec's task id rules; see docs/api.md, "Video task", and
// docs/lifecycle.md, "Settlement policy").
//
// An answer without a usable task id is released (the provider accepted nothing the
// client could read). Once the provider accepted the task it bills it, so the client is
// charged and gets the task even when accounting cannot record it within this reply's
// budget: recording then goes on after the reply, and until it lands the task reads as
// task_not_found; a task never recorded is logged at error level with everything needed
// to reconcile it.
func (r *Request) settleVideo(ctx context.Context, out []byte) ([]byte, *apierr.Error) {
	up := gjson.GetBytes(out, "id")
	if up.Type != gjson.String || !video.ValidTaskID(up.Str) {
		r.release(ctx, "upstream_unusable_response")
		return nil, upstreamError(apierr.UpstreamError)
	}
	id := video.NewTaskID()
	origin := ledger.TaskOrigin{Channel: r.channel.Name, UpstreamTaskID: up.Str}
	if err := r.recordTask(id, origin); err != nil {
		r.log().Warn("record video task: still trying after the reply", zap.String("task", id), zap.Error(err))
		r.recordLate(id, origin)
	}
	r.commitUnits(ctx, r.units)
	return withTaskID(out, id), nil
}

// recordLate keeps recording a task the reply could not wait for, in the background (the
// service's pending work, which a drain waits for), for a hold's lease; a task it cannot
// record is logged for reconciliation.
func (r *Request) recordLate(id string, origin ledger.TaskOrigin) {
	s := r.svc
	log := r.log()
	s.pending.add()
	backgroundWork.Go(func() {
		defer s.pending.done()
		if err := r.recordUntil(time.Now().Add(s.cfg.LeaseTTL), id, origin); err != nil {
			log.Error("video task charged but not recorded", zap.String("task", id),
				zap.String("channel", origin.Channel), zap.String("upstream_task", origin.UpstreamTaskID),
				zap.String("key", r.grant.KeyID), zap.String("model", r.model.ID), zap.Error(err))
		}
	})
}

// settleStream settles a streamed success, complete or not: upstream usage when it
// came (that is what the upstream billed), else what was delivered.
func (r *Request) settleStream(ctx context.Context) {
	if u, ok := r.resp.rw.Usage(); ok {
		r.commit(ctx, u)
		return
	}
	r.settleDelivered(ctx)
}

// settleDelivered charges what a stream delivered, counted locally; nothing delivered
// means nothing is charged.
func (r *Request) settleDelivered(ctx context.Context) {
	if !r.resp.delivered {
		r.release(ctx, "nothing_delivered")
		return
	}
	u := r.resp.rw.Delivered()
	r.commit(ctx, u)
}

var upstreamMessages = map[apierr.Code]string{
	apierr.UpstreamAccountUnavailable: "The upstream account behind this model cannot serve requests right now; nothing was charged.",
	apierr.ServiceUnavailable:         "No healthy upstream channel is available for this model; nothing was charged.",
	apierr.InvalidRequest:             "The upstream provider rejected the request as invalid; nothing was charged.",
	apierr.UpstreamError:              "The upstream provider returned an unusable response; nothing was charged.",
}

func upstreamError(code apierr.Code) *apierr.Error {
	msg, ok := upstreamMessages[code]
	if !ok {
		msg = "The request could not be completed; nothing was charged."
	}
	return apierr.New(code, msg)
}

// recordTimeout bounds recording a video task, retries included.
const recordTimeout = 1500 * time.Millisecond

// recordTask records the submitted task's owner in accounting, retrying transient
// failures (detached from the stream, like settlement): an upstream task that was
// accepted must not go unrecorded, and so uncharged, over a brief accounting hiccup. A
// retry that finds the task already recorded means an earlier attempt got through.
//
// The retries are bounded by recordTimeout, under Envoy's ext_proc message timeout (2 s):
// the client is still waiting for this reply.
func (r *Request) recordTask(taskID string, origin ledger.TaskOrigin) error {
	return r.recordUntil(time.Now().Add(recordTimeout), taskID, origin)
}

// recordUntil records the task, retrying until deadline; an "already exists" after the
// first attempt is an earlier attempt that got through (the gateway's ids never collide).
func (r *Request) recordUntil(deadline time.Time, taskID string, origin ledger.TaskOrigin) error {
	attempt := 0
	return r.svc.retry(func() time.Time { return deadline }, func(ctx context.Context) error {
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		attempt++
		err := r.svc.cfg.Ledger.RecordVideoTask(ctx, taskID, r.grant.KeyID, r.model.ID, origin)
		if attempt > 1 && ledger.ReasonOf(err) == ledger.ReasonAlreadyExists {
			return nil
		}
		return err
	})
}
