// Package envoy is the Envoy adapter: the ext_proc ExternalProcessor gRPC server. It
// reads each ProcessingRequest of a stream (one stream per HTTP request), hands it to
// the request lifecycle as neutral values, and answers with the matching oneof, exactly
// once per message and in order (Envoy 1.37+, see docs/design/envoy-extproc.md).
//
// It and extproc/xds are the only packages that import go-control-plane. It holds no business logic:
// everything it decides is how to express a lifecycle.Action in Envoy's terms —
// header values in raw_value only, clear_route_cache in the same CommonResponse as the
// header mutation, both body modes in every mode_override, a distinctive details string
// on immediate responses, the request's lifecycle.Facts as dynamic_metadata in
// MetadataNamespace (for Envoy's access log).
//
// The end of a stream (io.EOF or codes.Canceled from Recv, which race when Envoy resets
// the stream) is the end of the request: the lifecycle's End settles whatever was not.
// That includes a stream cut by the server's own stop (graceful drain past its
// deadline): the handler still returns through End, with a context detached from the
// stream's. A panic in a phase ends only its own stream (codes.Internal; Envoy fails the
// request closed) and still goes through End; it never takes the process, and with it
// every other stream's settlement, down.
//
// An optional Observer (metrics) hears how long each phase took. What became of the
// request (its answer and settlement) is the lifecycle's record (lifecycle.Observer),
// never rebuilt here from the messages.
package envoy

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// SettleTimeout bounds the settlement call made after a stream ended.
const SettleTimeout = 5 * time.Second

// Server implements extprocv3.ExternalProcessorServer.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer
	svc *lifecycle.Service
	log *zap.Logger
	obs Observer
	// cutting: the process is cutting its open streams (drain deadline). Envoy sees a
	// gRPC error and, without failure_mode_allow, answers the client its own 500
	// (ext_proc.cc, Filter::onGrpcError; docs/design/envoy-extproc.md, "Failures and the end of a stream"): the end
	// is extproc's failure, not a client that left.
	cutting atomic.Bool
}

// CutStreams tells the Server that the process is about to cut its open streams
// (grpc.Server.Stop): their ends are then settled as extproc's failure
// ("server_stopped"), never as a client that left.
func (s *Server) CutStreams() { s.cutting.Store(true) }

var _ extprocv3.ExternalProcessorServer = (*Server)(nil)

// Phase names a part of a request's processing, as the Observer hears it.
type Phase string

// The phases: one per ext_proc message kind, and the settlement at the end of a stream.
const (
	PhaseRequestHeaders  Phase = "request_headers"
	PhaseRequestBody     Phase = "request_body"
	PhaseResponseHeaders Phase = "response_headers"
	PhaseResponseBody    Phase = "response_body"
	PhaseSettle          Phase = "settle"
)

// Observer hears how long each phase of every stream took. It is called from the
// stream's goroutine, so it must be cheap and safe for concurrent use.
type Observer interface {
	ObservePhase(p Phase, d time.Duration)
}

// Option configures a Server.
type Option func(*Server)

// WithObserver makes the Server report to o.
func WithObserver(o Observer) Option { return func(s *Server) { s.obs = o } }

// New returns a Server over the lifecycle service.
func New(svc *lifecycle.Service, log *zap.Logger, opts ...Option) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Server{svc: svc, log: log}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Stream is the part of the gRPC stream Process uses, so tests can drive it with a
// channel-backed fake.
type Stream interface {
	Context() context.Context
	Recv() (*extprocv3.ProcessingRequest, error)
	Send(*extprocv3.ProcessingResponse) error
}

// Process serves one HTTP request's stream.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	return s.Serve(stream)
}

// Serve runs the stream loop over any Stream: a request's, or an attempt's
// (attempt.go).
func (s *Server) Serve(stream Stream) error {
	if isAttempt(stream) {
		return s.serveAttempt(stream)
	}
	ctx := stream.Context()
	req := s.svc.NewRequest()
	cause := lifecycle.CauseClientLeft
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), SettleTimeout)
		defer cancel()
		_, admitted := req.Reservation()
		start := time.Now()
		s.end(sctx, req, cause)
		if s.obs != nil && admitted {
			s.obs.ObservePhase(PhaseSettle, time.Since(start))
		}
	}()
	for {
		msg, err := stream.Recv()
		if err != nil {
			if s.cutting.Load() {
				cause = "server_stopped"
			}
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			cause = "stream_error"
			return err
		}
		if msg.GetProtocolConfig().GetRequestBodyMode() == filterv3.ProcessingMode_BUFFERED {
			// Sent on the first message only (Envoy 1.34+): the body message is whole
			// even without end_of_stream (request trailers follow it).
			req.RequestBodyBuffered()
		}
		start := time.Now()
		resp, ok := s.safeHandle(ctx, req, msg)
		if !ok {
			// The request's state is suspect: answer nothing more, end the stream (Envoy
			// fails the request closed) and let End settle what it can.
			cause = "panic"
			return status.Error(codes.Internal, "ext_proc: internal error")
		}
		if s.obs != nil {
			if p := phaseOf(msg); p != "" {
				s.obs.ObservePhase(p, time.Since(start))
			}
		}
		if resp == nil {
			continue
		}
		if err := stream.Send(resp); err != nil {
			cause = "send_failed"
			if status.Code(err) == codes.Canceled || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// safeHandle is handle with a panic contained to its stream: a panic in one request's
// phase must not take the process down, since every other stream's hold would then
// wait for accounting's expiry and partly delivered streams would go uncharged. ok is
// false after a panic.
func (s *Server) safeHandle(ctx context.Context, req *lifecycle.Request, msg *extprocv3.ProcessingRequest) (resp *extprocv3.ProcessingResponse, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic in an ext_proc phase", zap.String("phase", string(phaseOf(msg))),
				zap.Any("panic", v), zap.Stack("stack"))
			resp, ok = nil, false
		}
	}()
	return s.handle(ctx, req, msg), true
}

// end settles the request (the lifecycle's End), containing a panic there too: the
// hold then expires server-side, and the process keeps serving the other streams.
func (s *Server) end(ctx context.Context, req *lifecycle.Request, cause string) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic while settling: the hold expires server-side", zap.String("cause", cause),
				zap.Any("panic", v), zap.Stack("stack"))
		}
	}()
	req.End(ctx, cause)
}

func (s *Server) handle(ctx context.Context, req *lifecycle.Request, msg *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	switch v := msg.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		a := req.RequestHeaders(ctx, readHeaders(v.RequestHeaders.GetHeaders()), v.RequestHeaders.GetEndOfStream())
		return answer(a, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
			RequestHeaders: &extprocv3.HeadersResponse{Response: common(a)}}})
	case *extprocv3.ProcessingRequest_RequestBody:
		a := req.RequestBody(ctx, v.RequestBody.GetBody(), v.RequestBody.GetEndOfStream())
		return answer(a, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
			RequestBody: &extprocv3.BodyResponse{Response: common(a)}}})
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		h := readHeaders(v.ResponseHeaders.GetHeaders())
		a := req.ResponseHeaders(ctx, statusOf(h), h, v.ResponseHeaders.GetEndOfStream())
		resp := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
			ResponseHeaders: &extprocv3.HeadersResponse{Response: common(a)}}}
		resp.ModeOverride = modeOverride(filterv3.ProcessingMode_BUFFERED, a.ResponseBodyMode)
		return answer(a, resp)
	case *extprocv3.ProcessingRequest_ResponseBody:
		a := req.ResponseBody(ctx, v.ResponseBody.GetBody(), v.ResponseBody.GetEndOfStream())
		return answer(a, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
			ResponseBody: &extprocv3.BodyResponse{Response: common(a)}}})
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
			RequestTrailers: &extprocv3.TrailersResponse{}}}
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
			ResponseTrailers: &extprocv3.TrailersResponse{}}}
	}
	// Messages of other kinds (flow-control frames of newer protocol versions) need no
	// answer.
	s.log.Debug("ignoring ext_proc message without a request oneof")
	return nil
}

// phaseOf names the phase of a message; "" for trailers and unknown kinds.
func phaseOf(msg *extprocv3.ProcessingRequest) Phase {
	switch msg.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return PhaseRequestHeaders
	case *extprocv3.ProcessingRequest_RequestBody:
		return PhaseRequestBody
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return PhaseResponseHeaders
	case *extprocv3.ProcessingRequest_ResponseBody:
		return PhaseResponseBody
	}
	return ""
}

// statusOf is the :status of response headers (0 when absent).
func statusOf(h []lifecycle.Header) int {
	for _, x := range h {
		if x.Name == ":status" {
			code, _ := strconv.Atoi(x.Value)
			return code
		}
	}
	return 0
}

// modeOverride is the reply's mode_override for a response body mode (nil when
// unchanged). Both body modes are taken literally (1.34+), so the request's, as the
// stream's filter is configured (request), is sent with it.
func modeOverride(request filterv3.ProcessingMode_BodySendMode, m lifecycle.BodyMode) *filterv3.ProcessingMode {
	if m == lifecycle.ModeUnchanged {
		return nil
	}
	return &filterv3.ProcessingMode{
		RequestHeaderMode:   filterv3.ProcessingMode_SEND,
		ResponseHeaderMode:  filterv3.ProcessingMode_SEND,
		RequestBodyMode:     request,
		ResponseBodyMode:    bodyMode(m),
		RequestTrailerMode:  filterv3.ProcessingMode_SKIP,
		ResponseTrailerMode: filterv3.ProcessingMode_SKIP,
	}
}

func bodyMode(m lifecycle.BodyMode) filterv3.ProcessingMode_BodySendMode {
	switch m {
	case lifecycle.ModeBuffered:
		return filterv3.ProcessingMode_BUFFERED
	case lifecycle.ModeStreamed:
		return filterv3.ProcessingMode_STREAMED
	}
	return filterv3.ProcessingMode_NONE
}

// readHeaders converts Envoy's header map, reading raw_value (value as a fallback).
func readHeaders(hm *corev3.HeaderMap) []lifecycle.Header {
	hs := hm.GetHeaders()
	out := make([]lifecycle.Header, len(hs))
	for i, h := range hs {
		v := string(h.GetRawValue())
		if v == "" {
			v = h.GetValue()
		}
		out[i] = lifecycle.Header{Name: h.GetKey(), Value: v}
	}
	return out
}

// answer is the reply to a phase: resp, or the Action's immediate response instead, with
// the Action's Facts as dynamic metadata.
func answer(a lifecycle.Action, resp *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	if a.Immediate != nil {
		resp = immediate(a.Immediate)
	}
	resp.DynamicMetadata = dynamicMetadata(a.FactsSent, a.Facts)
	return resp
}

// common expresses an Action as a CommonResponse, or nil for "continue unchanged".
func common(a lifecycle.Action) *extprocv3.CommonResponse {
	var c extprocv3.CommonResponse
	empty := true
	if len(a.SetHeaders) > 0 || len(a.RemoveHeaders) > 0 {
		c.HeaderMutation = mutation(a.SetHeaders, a.RemoveHeaders)
		c.ClearRouteCache = a.ClearRouteCache
		empty = false
	}
	if a.ReplaceBody {
		if len(a.Body) == 0 {
			c.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}
		} else {
			c.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: a.Body}}
		}
		empty = false
	}
	if empty {
		return nil
	}
	return &c
}

func mutation(set []lifecycle.Header, remove []string) *extprocv3.HeaderMutation {
	m := &extprocv3.HeaderMutation{RemoveHeaders: remove}
	if len(set) > 0 {
		// One allocation each for the options, the headers and their values.
		opts := make([]corev3.HeaderValueOption, len(set))
		headers := make([]corev3.HeaderValue, len(set))
		n := 0
		for _, h := range set {
			n += len(h.Value)
		}
		values := make([]byte, 0, n)
		m.SetHeaders = make([]*corev3.HeaderValueOption, len(set))
		for i, h := range set {
			start := len(values)
			values = append(values, h.Value...)
			headers[i].Key, headers[i].RawValue = h.Name, values[start:len(values):len(values)]
			opts[i].Header = &headers[i]
			// Envoy reads only the deprecated append flag here, not append_action
			// (docs/design/envoy-extproc.md, "Mutations"): false replaces any existing value.
			//lint:ignore SA1019 ext_proc honours append, not append_action
			opts[i].Append = replace
			m.SetHeaders[i] = &opts[i]
		}
	}
	return m
}

// replace is the append flag of every header mutation: false. One value for all of them:
// a message is only read once made (marshalled).
var replace = wrapperspb.Bool(false)

func immediate(im *lifecycle.Immediate) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(im.Status)},
			Headers: mutation(im.Headers, nil),
			Body:    im.Body,
			Details: im.Details,
		}}}
}
