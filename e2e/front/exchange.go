package front

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// exchange is one downstream request and its ext_proc stream. Owned by the handler
// goroutine, except complete (read by the STREAMED body reader) and the stream's Send
// during a STREAMED body (only the reader sends then).
type exchange struct {
	f    *Front
	w    http.ResponseWriter
	r    *http.Request
	ctx  context.Context
	mode Mode

	stream       extprocsvc.ExternalProcessor_ProcessClient
	streamCancel context.CancelFunc
	sentFirst    bool
	// complete: ext_proc processing is over (stream closed by the server, immediate
	// response, error); nothing more is sent and data passes unmodified.
	complete atomic.Bool

	reqH        headerList
	route       routeChoice
	headersSent bool
	// abort: reset the downstream stream once cleanup is done.
	abort bool
	// upCancel cancels the upstream request (nil for local replies).
	upCancel context.CancelFunc
	// holdsExtProc: the exchange holds an ext_proc cluster circuit-breaker slot until
	// the end of the request.
	holdsExtProc bool

	// start, status (the response code sent, 0 for none) and meta (the dynamic metadata
	// ext_proc set) feed the access log.
	start  time.Time
	status int
	meta   map[string]*structpb.Struct
	// msgTimer is the message_timeout timer of await (nil until the first): it resets
	// the stream when it fires.
	msgTimer *time.Timer
}

// releaseSlots gives back the ext_proc cluster slot at the end of the request.
func (x *exchange) releaseSlots() {
	if x.holdsExtProc {
		x.holdsExtProc = false
		x.f.clusters.get(x.f.cfg.ExtProc.Cluster).release()
	}
}

type recvResult struct {
	resp *extprocsvc.ProcessingResponse
	err  error
}

type awaitStatus int

const (
	awaitReply     awaitStatus = iota
	awaitImmediate             // resp holds an immediate_response
	awaitClosed                // the server closed the stream with OK: continue without it
	awaitFailed                // gRPC error, timeout or spurious reply: local reply (status, details)
	awaitCanceled              // the downstream went away
)

type awaitResult struct {
	st      awaitStatus
	resp    *extprocsvc.ProcessingResponse
	status  int
	details string
}

func (x *exchange) openStream() error {
	// The side stream is one request on the ext_proc cluster: over its circuit
	// breaker, Envoy's async client fails it as a 503, which gRPC reads as UNAVAILABLE.
	if !x.f.clusters.get(x.f.cfg.ExtProc.Cluster).acquire() {
		return status.Error(codes.Unavailable, "ext_proc cluster overflow")
	}
	ctx, cancel := context.WithCancel(x.ctx)
	s, err := x.f.extproc.Process(ctx)
	if err != nil {
		cancel()
		x.f.clusters.get(x.f.cfg.ExtProc.Cluster).release()
		return err
	}
	x.holdsExtProc = true
	x.stream, x.streamCancel = s, cancel
	return nil
}

// closeStream ends the ext_proc stream as Envoy does when a request is done:
// half-close, then reset.
func (x *exchange) closeStream() {
	if x.stream == nil {
		return
	}
	_ = x.stream.CloseSend()
	x.streamCancel()
	x.stream = nil
}

// finish marks processing complete and resets the stream.
func (x *exchange) finish() {
	x.complete.Store(true)
	if x.streamCancel != nil {
		x.streamCancel()
	}
}

// send sends one message unless processing is complete; the first message carries
// protocol_config and metadata_context.
func (x *exchange) send(req *extprocsvc.ProcessingRequest) bool {
	if x.complete.Load() {
		return false
	}
	if !x.sentFirst {
		x.sentFirst = true
		m := x.f.cfg.ExtProc.Mode
		req.ProtocolConfig = &extprocsvc.ProtocolConfiguration{
			RequestBodyMode: m.RequestBody, ResponseBodyMode: m.ResponseBody,
		}
		req.MetadataContext = &corev3.Metadata{}
	}
	// A failed Send surfaces as the stream's status on Recv.
	_ = x.stream.Send(req)
	return true
}

// await waits for the reply to the oldest unanswered message; want says whether a
// reply is of the expected kind. It receives on the handler's goroutine: the message
// timer, or the downstream going away, resets the stream, which ends the wait.
func (x *exchange) await(want func(*extprocsvc.ProcessingResponse) bool) awaitResult {
	timer := x.messageTimer(x.f.cfg.ExtProc.MessageTimeout)
	for {
		resp, err := x.stream.Recv()
		if err == nil && resp.GetOverrideMessageTimeout() != nil {
			max := x.f.cfg.ExtProc.MaxMessageTimeout
			if nd := resp.GetOverrideMessageTimeout().AsDuration(); max > 0 && nd >= time.Millisecond && nd <= max && !timer.Reset(nd) {
				return x.messageTimedOut()
			}
			continue
		}
		// Whatever ended the wait, a timer that fired first decides it.
		if !timer.Stop() {
			return x.messageTimedOut()
		}
		switch {
		case errors.Is(err, io.EOF):
			x.complete.Store(true)
			return awaitResult{st: awaitClosed}
		case err != nil:
			x.finish()
			if x.ctx.Err() != nil {
				return awaitResult{st: awaitCanceled}
			}
			return awaitResult{st: awaitFailed, status: http.StatusInternalServerError,
				details: grpcErrorDetails(int(status.Code(err)))}
		}
		if resp.Response != nil {
			x.applyDynamicMetadata(resp)
		}
		if resp.GetImmediateResponse() != nil {
			x.finish()
			return awaitResult{st: awaitImmediate, resp: resp}
		}
		if !want(resp) {
			x.finish()
			return awaitResult{st: awaitFailed, status: http.StatusInternalServerError, details: detailsSpurious}
		}
		return awaitResult{st: awaitReply, resp: resp}
	}
}

// messageTimedOut ends processing after message_timeout.
func (x *exchange) messageTimedOut() awaitResult {
	x.finish()
	return awaitResult{st: awaitFailed, status: http.StatusGatewayTimeout, details: detailsMessageTimeout}
}

// messageTimer returns the exchange's message timer (one for all its awaits), armed to
// reset the stream after d; a wait that ends stops it.
func (x *exchange) messageTimer(d time.Duration) *time.Timer {
	if x.msgTimer == nil {
		cancel := x.streamCancel
		x.msgTimer = time.AfterFunc(d, cancel)
	} else {
		x.msgTimer.Reset(d)
	}
	return x.msgTimer
}

// settle turns a non-reply await result into the downstream outcome; it reports
// whether processing of the request goes on.
func (x *exchange) settle(ar awaitResult) bool {
	switch ar.st {
	case awaitReply, awaitClosed:
		return true
	case awaitImmediate:
		x.immediate(ar.resp.GetImmediateResponse())
	case awaitFailed:
		x.directLocalReply(ar.status, "", ar.details, nil)
	case awaitCanceled:
	}
	return false
}

// applyModeOverride honours mode_override in a headers reply; false when the
// effective mode is one the front does not emulate (answered 500).
func (x *exchange) applyModeOverride(resp *extprocsvc.ProcessingResponse) bool {
	if !x.f.cfg.ExtProc.AllowModeOverride || resp.GetModeOverride() == nil {
		return true
	}
	m, ok := modeFromOverride(resp.GetModeOverride())
	if !ok {
		x.f.logf("envoyfront: mode_override %v is not emulated", resp.GetModeOverride())
		x.finish()
		x.directLocalReply(http.StatusInternalServerError, "", detailsUnsupported, nil)
		return false
	}
	x.mode = m
	return true
}

func (x *exchange) path() string {
	p, _ := x.reqH.get(":path")
	return p
}

// immediate sends ext_proc's immediate_response as a local reply.
func (x *exchange) immediate(ir *extprocsvc.ImmediateResponse) {
	code := int(ir.GetStatus().GetCode())
	if code < 200 || code > 599 {
		code = http.StatusOK
	}
	details := strings.Join(strings.Fields(ir.GetDetails()), "_")
	x.directLocalReply(code, string(ir.GetBody()), details, func(h *headerList) {
		applyHeaderMutation(h, ir.GetHeaders(), permissiveRules)
	})
}

// directLocalReply sends a local reply straight downstream, past ext_proc (Envoy's
// path for replies sent by ext_proc itself or once response headers were seen); after
// response headers went downstream it resets the stream instead.
func (x *exchange) directLocalReply(code int, body, details string, modify func(*headerList)) {
	x.finish()
	if x.headersSent {
		x.abort = true
		return
	}
	lr := buildLocalReply(x.f.cfg.LocalReply, x.path(), code, body, details, modify)
	h := append(headerList{{":status", strconv.Itoa(lr.status)}}, lr.headers...)
	x.writeHeaders(h)
	_, _ = x.w.Write(lr.body)
}

// routerLocalReply is a local reply generated before any upstream response (by the
// router or the connection manager): rewritten by local_reply_config, then sent
// through the encoder path, so ext_proc sees its response headers (Envoy 1.37+).
func (x *exchange) routerLocalReply(code int, body, details string) {
	lr := buildLocalReply(x.f.cfg.LocalReply, x.path(), code, body, details, nil)
	h := append(headerList{{":status", strconv.Itoa(lr.status)}}, lr.headers...)
	x.encode(h, bytes.NewReader(lr.body), len(lr.body) == 0)
}

func (x *exchange) writeHeaders(h headerList) {
	code := http.StatusOK
	for _, e := range h {
		if e.Key == ":status" {
			code, _ = strconv.Atoi(e.Value)
			continue
		}
		if strings.HasPrefix(e.Key, ":") || hopByHop[e.Key] {
			continue
		}
		k := canonicalKey(e.Key)
		x.w.Header()[k] = append(x.w.Header()[k], e.Value)
	}
	x.setRequestIDInResponse()
	x.status = code
	x.w.WriteHeader(code)
	x.headersSent = true
}

// setRequestIDInResponse emulates always_set_request_id_in_response. Envoy's connection
// manager does it in ActiveStream::encodeHeaders (source/common/http/conn_manager_impl.cc)
// through ConnectionManagerUtility::mutateResponseHeaders (conn_manager_utility.cc), after
// every encoder filter and for every response the stream sends (upstream answers, local
// replies, ext_proc immediate responses): the request's x-request-id, as the filters left
// it, replaces any value in the response; a request without one adds nothing.
func (x *exchange) setRequestIDInResponse() {
	if !x.f.cfg.AlwaysSetRequestID {
		return
	}
	if id, ok := x.reqH.get(hdrRequestID); ok {
		x.w.Header()[canonicalKey(hdrRequestID)] = []string{id}
	}
}

func isRequestHeaders(r *extprocsvc.ProcessingResponse) bool  { return r.GetRequestHeaders() != nil }
func isRequestBody(r *extprocsvc.ProcessingResponse) bool     { return r.GetRequestBody() != nil }
func isResponseHeaders(r *extprocsvc.ProcessingResponse) bool { return r.GetResponseHeaders() != nil }
func isResponseBody(r *extprocsvc.ProcessingResponse) bool    { return r.GetResponseBody() != nil }

// run processes the request from headers to the end of the response.
func (x *exchange) run() {
	// request_timeout: Envoy arms the request timer when the stream starts and disarms
	// it once the request has been decoded whole (or the response starts); on expiry the
	// HCM answers 408 "request timeout" with details request_overall_timeout
	// (conn_manager_impl.cc, ActiveStream::onRequestTimeout; the field's doc in
	// http_connection_manager.proto). A long streamed answer is therefore never cut by
	// it. The front bounds reading the body with it: our request body is buffered whole
	// before anything goes upstream.
	rc := http.NewResponseController(x.w)
	if t := x.f.cfg.RequestTimeout; t > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(t))
	}
	x.reqH = x.f.requestHeaders(x.r)
	x.route = x.f.chooseRoute(x.reqH)
	hasBody := x.r.Body != nil && x.r.Body != http.NoBody && x.r.ContentLength != 0
	reqRules := x.f.rules(false, true)

	if err := x.openStream(); err != nil {
		x.directLocalReply(http.StatusInternalServerError, "", grpcErrorDetails(int(status.Code(err))), nil)
		return
	}

	// Request headers.
	var body io.Reader
	replaced := false
	x.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocsvc.HttpHeaders{Headers: x.reqH.toProto(), EndOfStream: !hasBody},
	}})
	ar := x.await(isRequestHeaders)
	if !x.settle(ar) {
		return
	}
	if ar.st == awaitReply {
		if !x.applyModeOverride(ar.resp) {
			return
		}
		cr := ar.resp.GetRequestHeaders().GetResponse()
		if d := applyHeaderMutation(&x.reqH, cr.GetHeaderMutation(), reqRules); d != "" {
			x.directLocalReply(http.StatusInternalServerError, "", d, nil)
			return
		}
		if cr.GetClearRouteCache() && cr.GetHeaderMutation() != nil {
			x.route = x.f.chooseRoute(x.reqH)
		}
		if cr.GetStatus() == extprocsvc.CommonResponse_CONTINUE_AND_REPLACE {
			replaced = true
			b := cr.GetBodyMutation().GetBody()
			if x.overBufferLimit(b) {
				return
			}
			body = bytes.NewReader(b)
			x.mode.RequestBody = extprocv3.ProcessingMode_NONE
		}
	}

	// Request body.
	if hasBody && !replaced {
		if x.mode.RequestBody == extprocv3.ProcessingMode_BUFFERED && !x.complete.Load() {
			b, err := readLimited(x.r.Body, x.f.cfg.BufferLimit)
			if errors.Is(err, errTooLarge) {
				// Over the limit: 413 before ext_proc ever sees a body (1.35+).
				x.routerLocalReply(http.StatusRequestEntityTooLarge, "Payload Too Large", detailsPayloadTooLarge)
				return
			}
			if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
				// Envoy (1.37+) also shows this local reply to ext_proc, and extproc
				// passes a reply to a request it never admitted unchanged
				// (lifecycle.Request.ResponseHeaders). The front writes it directly: Go
				// cancels the request's context on the failed read, which ends the
				// side stream; the client sees the same answer.
				x.directLocalReply(http.StatusRequestTimeout, "request timeout", detailsRequestTimeout, nil)
				return
			}
			_ = rc.SetReadDeadline(time.Time{}) // the request is whole: the timer is disarmed
			if err != nil {
				return // the client went away
			}
			// HTTP/2 request trailers end the stream, not the body: Envoy sends the
			// buffered body when they arrive, with end_of_stream false, and nothing
			// when no data came (ext_proc.cc Filter::onTrailers); with
			// request_trailer_mode SKIP (the only one emulated) nothing follows. The
			// HTTP/1 codec drops trailers unless enable_trailers (not emulated).
			trailers := x.r.ProtoMajor == 2 && hasValues(x.r.Trailer)
			ar := awaitResult{st: awaitClosed}
			if len(b) > 0 || !trailers {
				x.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_RequestBody{
					RequestBody: &extprocsvc.HttpBody{Body: b, EndOfStream: !trailers},
				}})
				ar = x.await(isRequestBody)
			}
			if !x.settle(ar) {
				return
			}
			if ar.st == awaitReply {
				cr := ar.resp.GetRequestBody().GetResponse()
				if d := applyHeaderMutation(&x.reqH, cr.GetHeaderMutation(), reqRules); d != "" {
					x.directLocalReply(http.StatusInternalServerError, "", d, nil)
					return
				}
				var ok bool
				if b, ok = bufferedMutation(x.reqH, cr.GetBodyMutation(), b); !ok {
					x.directLocalReply(http.StatusInternalServerError, "", detailsMismatchCL, nil)
					return
				}
				if x.overBufferLimit(b) {
					return
				}
				if cr.GetClearRouteCache() && cr.GetHeaderMutation() != nil {
					x.route = x.f.chooseRoute(x.reqH)
				}
			}
			body = bytes.NewReader(b)
		} else {
			body = x.r.Body
		}
	}
	x.proxy(body)
}

// overBufferLimit answers 413 when ext_proc's replacement of the request body b does not
// fit the buffer limit, and reports whether it did. The limit applies to what ext_proc
// put in the buffer, not only to what the client sent: the replacement is written into
// the decoder's buffered data (processor_state.cc ProcessorState::handleBodyResponse and
// handleHeadersResponse, modifyBufferedData / addBufferedData), a watermark buffer whose
// high watermark is the stream's buffer limit (filter_manager.cc
// ActiveStreamDecoderFilter::createBuffer, modifyDecodingBuffer); crossing it while
// buffering answers 413 request_payload_too_large (requestDataTooLarge).
func (x *exchange) overBufferLimit(b []byte) bool {
	if int64(len(b)) <= x.f.cfg.BufferLimit {
		return false
	}
	x.routerLocalReply(http.StatusRequestEntityTooLarge, "Payload Too Large", detailsPayloadTooLarge)
	return true
}

// hasValues reports whether a trailer map holds a value (Go lists the trailers a
// request declared before they arrive, without values).
func hasValues(h http.Header) bool {
	for _, v := range h {
		if len(v) > 0 {
			return true
		}
	}
	return false
}

// idleReader restarts the stream idle timer on every read.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (i *idleReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	i.t.Reset(i.d)
	return n, err
}

// encode runs the response (upstream or local reply) through ext_proc's encoder side
// and downstream.
func (x *exchange) encode(h headerList, body io.Reader, eos bool) {
	var held *heldBody
	if !x.complete.Load() && x.mode.ResponseHeader == extprocv3.ProcessingMode_SEND {
		if body != nil && !eos {
			// The body keeps arriving while the headers reply is awaited (Envoy holds it:
			// ext_proc.cc Filter::onData, "Header processing still in progress").
			held = holdBody(body, int(x.f.cfg.BufferLimit), x.f.heldBodyEnded)
			defer held.close()
			body = held
		}
		x.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_ResponseHeaders{
			ResponseHeaders: &extprocsvc.HttpHeaders{Headers: h.toProto(), EndOfStream: eos},
		}})
		ar := x.await(isResponseHeaders)
		if !x.settle(ar) {
			return
		}
		if ar.st == awaitReply {
			if !x.applyModeOverride(ar.resp) {
				return
			}
			cr := ar.resp.GetResponseHeaders().GetResponse()
			// After a STREAMED override Envoy keeps the upstream's content-length and
			// ignores a set (a remove still works).
			streamed := x.mode.ResponseBody == extprocv3.ProcessingMode_STREAMED
			if d := applyHeaderMutation(&h, cr.GetHeaderMutation(), x.f.rules(true, !streamed)); d != "" {
				x.directLocalReply(http.StatusInternalServerError, "", d, nil)
				return
			}
			if cr.GetStatus() == extprocsvc.CommonResponse_CONTINUE_AND_REPLACE {
				body, eos = bytes.NewReader(cr.GetBodyMutation().GetBody()), false
				x.mode.ResponseBody = extprocv3.ProcessingMode_NONE
			}
		}
	}
	if eos || x.complete.Load() || x.mode.ResponseBody == extprocv3.ProcessingMode_NONE {
		// Nothing more will be sent (the front refuses trailer modes): Envoy 1.37+
		// closes the ext_proc stream right after the headers reply, before the body
		// passes (ext_proc.cc Filter::closeGrpcStreamIfLastRespReceived, response
		// headers with no body or body mode NONE).
		x.closeStream()
		x.writeHeaders(h)
		x.copyThrough(body)
		return
	}
	if x.mode.ResponseBody == extprocv3.ProcessingMode_BUFFERED {
		x.bufferedResponse(h, body)
		return
	}
	// STREAMED: what arrived while the headers reply was awaited goes first
	// (processor_state.cc ProcessorState::handleHeadersResponse). The whole body goes
	// as one end_of_stream message handled like a buffered body (headers still held,
	// the reply's header mutation applied, content-length checked); a part of it goes
	// as one message without end_of_stream, then the body streams on.
	var first []byte
	if held != nil {
		var whole bool
		if first, whole = held.take(); whole {
			x.bufferedReply(h, first)
			return
		}
	}
	x.writeHeaders(h)
	http.NewResponseController(x.w).Flush()
	x.streamedResponse(first, body)
}

// copyThrough copies body downstream, flushing every read.
func (x *exchange) copyThrough(body io.Reader) {
	if body == nil {
		return
	}
	rc := http.NewResponseController(x.w)
	rb := getReadBuf()
	defer putReadBuf(rb)
	buf := rb[:]
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := x.w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			// Upstream reset mid-response: reset downstream too.
			x.abort = x.ctx.Err() == nil
			return
		}
	}
}

func (x *exchange) bufferedResponse(h headerList, body io.Reader) {
	b, err := readLimited(body, x.f.cfg.BufferLimit)
	switch {
	case errors.Is(err, errTooLarge):
		x.directLocalReply(http.StatusInternalServerError, "", detailsResponseTooLarge, nil)
		return
	case err != nil:
		x.finish()
		x.abort = x.ctx.Err() == nil
		return
	}
	x.bufferedReply(h, b)
}

// bufferedReply sends the whole response body b in one message, applies the reply to
// the still-held headers h and the body, and sends both downstream.
func (x *exchange) bufferedReply(h headerList, b []byte) {
	x.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocsvc.HttpBody{Body: b, EndOfStream: true},
	}})
	ar := x.await(isResponseBody)
	if !x.settle(ar) {
		return
	}
	if ar.st == awaitReply {
		cr := ar.resp.GetResponseBody().GetResponse()
		if d := applyHeaderMutation(&h, cr.GetHeaderMutation(), x.f.rules(true, true)); d != "" {
			x.directLocalReply(http.StatusInternalServerError, "", d, nil)
			return
		}
		var ok bool
		if b, ok = bufferedMutation(h, cr.GetBodyMutation(), b); !ok {
			x.directLocalReply(http.StatusInternalServerError, "", detailsMismatchCL, nil)
			return
		}
	}
	x.writeHeaders(h)
	_, _ = x.w.Write(b)
}

// mutateBody applies ext_proc's body_mutation to b; mutated reports whether it
// replaced b (cleared or set).
func mutateBody(bm *extprocsvc.BodyMutation, b []byte) (out []byte, mutated bool) {
	switch {
	case bm.GetClearBody():
		return nil, true
	case bm.GetBody() != nil:
		return bm.GetBody(), true
	}
	return b, false
}

// bufferedMutation applies a body_mutation to a buffered body with headers h; ok is
// false when the mutated body no longer matches h's content-length (Envoy then
// answers 500 mismatched_content_length).
func bufferedMutation(h headerList, bm *extprocsvc.BodyMutation, b []byte) (out []byte, ok bool) {
	out, mutated := mutateBody(bm, b)
	if cl, has := h.get("content-length"); mutated && has && cl != strconv.Itoa(len(out)) {
		return out, false
	}
	return out, true
}

type chunk struct {
	data []byte
	eos  bool
	sent bool // a response_body message went to ext_proc for it
	err  error
}

// streamedResponse sends one response_body per upstream read without waiting for
// replies (pipelined), applies the replies in order and flushes every chunk
// downstream. An upstream reset, client disconnect, ext_proc error or immediate
// response after the headers went out resets the downstream stream; no final
// end_of_stream is sent unless the upstream body ended.
//
// first is the data held while the headers reply was awaited: sent as the first chunk.
func (x *exchange) streamedResponse(first []byte, body io.Reader) {
	pending := make(chan chunk, 64)
	readerCtx, stopReader := context.WithCancel(x.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(pending)
		rb := getReadBuf()
		defer putReadBuf(rb)
		buf := rb[:]
		for {
			data, err := first, error(nil)
			if len(first) > 0 {
				first = nil
			} else {
				var n int
				n, err = body.Read(buf)
				data = bytes.Clone(buf[:n])
			}
			var c chunk
			switch {
			case len(data) > 0:
				c.data = data
				c.sent = x.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_ResponseBody{
					ResponseBody: &extprocsvc.HttpBody{Body: c.data},
				}})
			case err == io.EOF:
				c.eos = true
				c.sent = x.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_ResponseBody{
					ResponseBody: &extprocsvc.HttpBody{EndOfStream: true},
				}})
			case err != nil:
				c.err = err
			default:
				continue
			}
			select {
			case pending <- c:
			case <-readerCtx.Done():
				return
			}
			if c.eos || c.err != nil {
				return
			}
		}
	}()
	defer func() {
		stopReader()
		if x.upCancel != nil {
			x.upCancel() // unblocks a reader waiting on the upstream
		}
		if x.streamCancel != nil && !x.complete.Load() {
			// Not a normal end: reset the ext_proc stream so a blocked Send returns.
			x.finish()
		}
		wg.Wait()
	}()

	rc := http.NewResponseController(x.w)
	for c := range pending {
		if c.err != nil {
			x.finish()
			x.abort = x.ctx.Err() == nil
			return
		}
		out := c.data
		if c.sent && !x.complete.Load() {
			ar := x.await(isResponseBody)
			switch ar.st {
			case awaitReply:
				out, _ = mutateBody(ar.resp.GetResponseBody().GetResponse().GetBodyMutation(), out)
			case awaitClosed:
			case awaitCanceled:
				return
			default:
				// An immediate response or failure after headers went out: reset.
				x.finish()
				x.abort = true
				return
			}
		}
		if len(out) > 0 {
			if _, err := x.w.Write(out); err != nil {
				x.finish()
				return
			}
			_ = rc.Flush()
		}
		if c.eos {
			x.complete.Store(true)
			return
		}
	}
}
