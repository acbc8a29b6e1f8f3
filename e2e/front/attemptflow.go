package front

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/status"
)

// filteredAttempt is one attempt through the cluster's upstream filter chain
// [ext_proc, upstream_codec], on a fresh ext_proc stream:
//
//   - request_headers: the request as the router sends this attempt (routedHeaders),
//     with the picked endpoint's attributes (ext_proc.cc Filter::addAttributes, on the
//     first message of the decoding direction). The reply's header mutation applies to
//     this attempt only; CONTINUE_AND_REPLACE with a body_mutation replaces the whole
//     body and removes content-length, and no body message follows
//     (processor_state.cc ProcessorState::handleHeadersResponse; the router's own body
//     is then drained, Filter::onData bodyReplaced).
//   - the request goes upstream. Envoy asks the pool for a connection before the
//     filter chain runs (upstream_request.cc UpstreamRequest::acceptHeadersFromRouter:
//     conn_pool_->newStream, then filter_manager_->decodeHeaders) but the codec filter
//     writes only what the chain let through; the front connects when it writes, so a
//     connection failure is seen after the request_headers reply (in Envoy it may come
//     before it). On a failure or reset before response headers the stream is closed
//     with no response message and the router decides on a retry as without filters.
//   - response_headers: the reply may mutate headers, :status included, and (with
//     allow_mode_override) switch response_body_mode to BUFFERED: the whole body then
//     goes as one response_body whose reply may mutate headers and body before the
//     headers go on. The router sees the status the filters left
//     (router.cc Filter::onUpstreamHeaders, called from UpstreamRequest::decodeHeaders
//     once every upstream filter processed the headers).
//   - an immediate response, or an ext_proc failure, becomes a local reply of the
//     downstream stream (UpstreamFilterManager::sendLocalReply), never retried.
//     Envoy's upstream ext_proc sends it only since envoyproxy/envoy PR #41231; before,
//     Filter::sendImmediateResponse ignored it in an upstream filter.
func (x *exchange) filteredAttempt(ctx context.Context, up *upstream, host *Host, body io.Reader, release func()) (*http.Response, resetReason, func(), bool) {
	cfg := up.cfg.Attempt
	st, err := x.f.openAttemptStream(ctx, cfg)
	if err != nil {
		release()
		x.upstreamFilterLocalReply(http.StatusInternalServerError, "", grpcErrorDetails(int(status.Code(err))), nil)
		return nil, 0, func() {}, true
	}
	rel := func() { st.end(); release() }
	// answer ends the attempt with a local reply (or, when the client went away, as a
	// reset the router finds the client gone on).
	answer := func(ar awaitResult) (*http.Response, resetReason, func(), bool) {
		switch ar.st {
		case awaitCanceled:
			return nil, resetRemote, rel, false
		case awaitImmediate:
			rel()
			x.upstreamFilterImmediate(ar.resp.GetImmediateResponse())
		default:
			rel()
			x.upstreamFilterLocalReply(ar.status, "", ar.details, nil)
		}
		return nil, 0, func() {}, true
	}
	unsupported := func(what string) (*http.Response, resetReason, func(), bool) {
		x.f.logf("envoyfront: upstream ext_proc %s is not emulated", what)
		return answer(awaitResult{st: awaitFailed, status: http.StatusInternalServerError, details: detailsUnsupported})
	}

	// Request headers.
	h := x.routedHeaders(up, host)
	responseBody := extprocv3.ProcessingMode_NONE
	st.send(&extprocsvc.ProcessingRequest{
		Request:    &extprocsvc.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocsvc.HttpHeaders{Headers: h.toProto(), EndOfStream: body == nil}},
		Attributes: cfg.attributes(host),
	})
	ar := st.await(isRequestHeaders)
	switch ar.st {
	case awaitReply:
		if pm := ar.resp.GetModeOverride(); pm != nil && cfg.AllowModeOverride {
			m, ok := attemptModeOverride(pm)
			if !ok {
				return unsupported("mode_override " + pm.String())
			}
			responseBody = m
		}
		cr := ar.resp.GetRequestHeaders().GetResponse()
		if d := applyHeaderMutation(&h, cr.GetHeaderMutation(), mutationRules{allowContentLength: true}); d != "" {
			return answer(awaitResult{st: awaitFailed, status: http.StatusInternalServerError, details: d})
		}
		if cr.GetStatus() == extprocsvc.CommonResponse_CONTINUE_AND_REPLACE && cr.GetBodyMutation() != nil {
			replaced, _ := mutateBody(cr.GetBodyMutation(), nil)
			if int64(len(replaced)) > x.f.cfg.BufferLimit {
				// The upstream filter chain buffers with the downstream's limit
				// (router/upstream_request.cc UpstreamRequest::UpstreamRequest passes
				// decoderBufferLimit() to its UpstreamFilterManager); over it, as
				// downstream (exchange.overBufferLimit), a 413 local reply.
				return answer(awaitResult{st: awaitFailed, status: http.StatusRequestEntityTooLarge, details: detailsPayloadTooLarge})
			}
			body = bytes.NewReader(replaced)
			h.del("content-length")
		}
	case awaitClosed:
	default:
		return answer(ar)
	}

	// The attempt upstream.
	req, err := newUpstreamRequest(ctx, up, host, h, body)
	if err != nil {
		st.end()
		return nil, resetRemote, rel, false
	}
	resp, reset := roundTrip(up, host, req)
	if resp == nil {
		st.end()
		return nil, reset, rel, false
	}

	// Response headers.
	rh := append(headerList{{":status", strconv.Itoa(resp.StatusCode)}}, fromHTTP(resp.Header)...)
	if _, ok := rh.get("content-length"); !ok && resp.ContentLength >= 0 {
		rh.add("content-length", strconv.FormatInt(resp.ContentLength, 10))
	}
	eos := resp.ContentLength == 0
	st.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocsvc.HttpHeaders{Headers: rh.toProto(), EndOfStream: eos},
	}})
	var newBody []byte
	replaced := false
	ar = st.await(isResponseHeaders)
	switch ar.st {
	case awaitReply:
		if pm := ar.resp.GetModeOverride(); pm != nil && cfg.AllowModeOverride {
			m, ok := attemptModeOverride(pm)
			if !ok {
				_ = resp.Body.Close()
				return unsupported("mode_override " + pm.String())
			}
			responseBody = m
		}
		cr := ar.resp.GetResponseHeaders().GetResponse()
		if d := applyHeaderMutation(&rh, cr.GetHeaderMutation(), mutationRules{response: true, allowContentLength: true}); d != "" {
			_ = resp.Body.Close()
			return answer(awaitResult{st: awaitFailed, status: http.StatusInternalServerError, details: d})
		}
		if cr.GetStatus() == extprocsvc.CommonResponse_CONTINUE_AND_REPLACE && cr.GetBodyMutation() != nil {
			newBody, _ = mutateBody(cr.GetBodyMutation(), nil)
			replaced = true
			rh.del("content-length")
			responseBody = extprocv3.ProcessingMode_NONE
		}
	case awaitClosed:
		responseBody = extprocv3.ProcessingMode_NONE
	default:
		_ = resp.Body.Close()
		return answer(ar)
	}

	if responseBody == extprocv3.ProcessingMode_BUFFERED && !eos {
		b, err := readLimited(resp.Body, x.f.cfg.BufferLimit)
		_ = resp.Body.Close()
		switch {
		case errors.Is(err, errTooLarge):
			return answer(awaitResult{st: awaitFailed, status: http.StatusInternalServerError, details: detailsResponseTooLarge})
		case err != nil:
			// Reset while the headers were held: the router saw no headers yet.
			st.end()
			return nil, resetRemote, rel, false
		}
		st.send(&extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocsvc.HttpBody{Body: b, EndOfStream: true},
		}})
		ar = st.await(isResponseBody)
		switch ar.st {
		case awaitReply:
			cr := ar.resp.GetResponseBody().GetResponse()
			if d := applyHeaderMutation(&rh, cr.GetHeaderMutation(), mutationRules{response: true, allowContentLength: true}); d != "" {
				return answer(awaitResult{st: awaitFailed, status: http.StatusInternalServerError, details: d})
			}
			var ok bool
			if b, ok = bufferedMutation(rh, cr.GetBodyMutation(), b); !ok {
				return answer(awaitResult{st: awaitFailed, status: http.StatusInternalServerError, details: detailsMismatchCL})
			}
		case awaitClosed:
		default:
			return answer(ar)
		}
		newBody, replaced = b, true
	} else {
		// Nothing more to process: Envoy 1.37 closes the stream now
		// (Filter::closeGrpcStreamIfLastRespReceived); BUFFERED waits for the filter's
		// destruction with the attempt.
		st.end()
	}
	if replaced {
		_ = resp.Body.Close()
	}
	out, ok := filteredResponse(resp, rh, newBody, replaced)
	if !ok {
		return answer(awaitResult{st: awaitFailed, status: http.StatusInternalServerError, details: detailsBadHeaderChar})
	}
	return out, 0, rel, false
}

// attemptModeOverride reads a mode_override of the upstream ext_proc: its modes are
// taken literally (Filter::onReceiveMessage sets both directions' modes); the front
// emulates headers SEND, request body NONE, response body NONE or BUFFERED, trailers
// SKIP.
func attemptModeOverride(pm *extprocv3.ProcessingMode) (extprocv3.ProcessingMode_BodySendMode, bool) {
	send := func(m extprocv3.ProcessingMode_HeaderSendMode) bool {
		return m == extprocv3.ProcessingMode_SEND || m == extprocv3.ProcessingMode_DEFAULT
	}
	skip := func(m extprocv3.ProcessingMode_HeaderSendMode) bool {
		return m == extprocv3.ProcessingMode_SKIP || m == extprocv3.ProcessingMode_DEFAULT
	}
	rb := pm.GetResponseBodyMode()
	ok := send(pm.GetRequestHeaderMode()) && send(pm.GetResponseHeaderMode()) &&
		pm.GetRequestBodyMode() == extprocv3.ProcessingMode_NONE &&
		(rb == extprocv3.ProcessingMode_NONE || rb == extprocv3.ProcessingMode_BUFFERED) &&
		skip(pm.GetRequestTrailerMode()) && skip(pm.GetResponseTrailerMode())
	return rb, ok
}

// filteredResponse is the response as the upstream filters leave it for the router:
// the mutated headers and :status, and the new body when one replaced it.
func filteredResponse(resp *http.Response, h headerList, body []byte, replaced bool) (*http.Response, bool) {
	code := resp.StatusCode
	if v, ok := h.get(":status"); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, false
		}
		code = n
	}
	out := &http.Response{
		Status: strconv.Itoa(code) + " " + http.StatusText(code), StatusCode: code,
		Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header: http.Header{}, Body: resp.Body, ContentLength: -1, Request: resp.Request,
	}
	for _, e := range h {
		if !strings.HasPrefix(e.Key, ":") {
			k := canonicalKey(e.Key)
			out.Header[k] = append(out.Header[k], e.Value)
		}
	}
	if cl, ok := h.get("content-length"); ok {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil {
			out.ContentLength = n
		}
	}
	if replaced {
		out.Body = io.NopCloser(bytes.NewReader(body))
		if len(body) == 0 {
			out.ContentLength = 0
		}
	}
	return out, true
}

// upstreamFilterLocalReply is a local reply of an upstream filter: it goes through the
// downstream filter manager (UpstreamFilterManager::sendLocalReply calls the router's
// callbacks), so like the router's own it passes the connection manager's ext_proc.
func (x *exchange) upstreamFilterLocalReply(code int, body, details string, modify func(*headerList)) {
	lr := buildLocalReply(x.f.cfg.LocalReply, x.path(), code, body, details, modify)
	h := append(headerList{{":status", strconv.Itoa(lr.status)}}, lr.headers...)
	x.encode(h, bytes.NewReader(lr.body), len(lr.body) == 0)
}

// upstreamFilterImmediate sends the upstream ext_proc's immediate_response as that
// local reply (Filter::sendImmediateResponse: status 200 unless a valid one is given,
// details with spaces made underscores, headers by the permissive rules).
func (x *exchange) upstreamFilterImmediate(ir *extprocsvc.ImmediateResponse) {
	code := int(ir.GetStatus().GetCode())
	if code < 200 || code > 599 {
		code = http.StatusOK
	}
	details := strings.Join(strings.Fields(ir.GetDetails()), "_")
	x.upstreamFilterLocalReply(code, string(ir.GetBody()), details, func(h *headerList) {
		applyHeaderMutation(h, ir.GetHeaders(), permissiveRules)
	})
}
