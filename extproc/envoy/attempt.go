package envoy

import (
	"errors"
	"io"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/xds"
)

// An attempt's stream: the failover cluster's upstream ext_proc, once per attempt of the
// router (lifecycle/attempt.go). Its gRPC initial metadata marks it (xds.AttemptHeader);
// its request headers carry the channel of the endpoint Envoy picked as an attribute
// (xds.AttemptAttribute) and the request's x-request-id.

// attributesKey is where Envoy puts the ext_proc filter's attributes in a
// ProcessingRequest.
const attributesKey = "envoy.filters.http.ext_proc"

// isAttempt reports whether the stream is an attempt's.
func isAttempt(stream Stream) bool {
	md, _ := metadata.FromIncomingContext(stream.Context())
	v := md.Get(xds.AttemptHeader)
	return len(v) == 1 && v[0] == xds.AttemptValue
}

// serveAttempt runs an attempt's stream: the request headers start the attempt (the
// reply replaces the whole request with the channel's), the response headers and, for
// an error, the response body classify its answer; a stream that ends without response
// headers is an attempt that reached nothing.
//
// A panic ends only this stream (codes.Internal: Envoy fails the attempt closed and the
// request's own stream settles it), never the process.
func (s *Server) serveAttempt(stream Stream) (err error) {
	var at *lifecycle.Attempt
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic in an attempt's stream", zap.Any("panic", v), zap.Stack("stack"))
			err = status.Error(codes.Internal, "ext_proc: internal error")
		}
		if at != nil {
			at.End()
		}
	}()
	for {
		msg, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		var a lifecycle.Action
		var resp *extprocv3.ProcessingResponse
		switch v := msg.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			requestID := ""
			for _, h := range readHeaders(v.RequestHeaders.GetHeaders()) {
				if h.Name == "x-request-id" {
					requestID = h.Value
				}
			}
			channel := msg.GetAttributes()[attributesKey].GetFields()[xds.AttemptAttribute].GetStringValue()
			at, a = s.svc.StartAttempt(requestID, channel)
			c := common(a)
			if a.ReplaceMessage && c != nil {
				c.Status = extprocv3.CommonResponse_CONTINUE_AND_REPLACE
			}
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
				RequestHeaders: &extprocv3.HeadersResponse{Response: c}}}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			if at != nil {
				hs := readHeaders(v.ResponseHeaders.GetHeaders())
				a = at.ResponseHeaders(statusOf(hs), hs, v.ResponseHeaders.GetEndOfStream())
			}
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
				ResponseHeaders: &extprocv3.HeadersResponse{Response: common(a)}}}
			// The attempt's request body stays NONE: it was replaced whole.
			resp.ModeOverride = modeOverride(filterv3.ProcessingMode_NONE, a.ResponseBodyMode)
		case *extprocv3.ProcessingRequest_ResponseBody:
			if at != nil {
				a = at.ResponseBody(v.ResponseBody.GetBody())
			}
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
				ResponseBody: &extprocv3.BodyResponse{Response: common(a)}}}
		default:
			// Nothing else is asked for (body NONE, trailers SKIP); answer a stray message
			// unchanged rather than stall the attempt.
			resp = s.handleStray(msg)
		}
		if a.Immediate != nil {
			resp = immediate(a.Immediate)
		}
		if resp == nil {
			continue
		}
		if err := stream.Send(resp); err != nil {
			if status.Code(err) == codes.Canceled || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// handleStray answers a message an attempt's stream does not expect, unchanged.
func (s *Server) handleStray(msg *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	s.log.Debug("attempt stream: unexpected message", zap.String("phase", string(phaseOf(msg))))
	switch msg.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestBody:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}}
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}
	}
	return nil
}
