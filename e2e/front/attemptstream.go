package front

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// attemptStream is the gRPC stream of one attempt's upstream ext_proc filter. Envoy
// opens it when the filter sees the attempt's request headers (ext_proc.cc
// Filter::openStream from Filter::onHeaders) and closes it, half-close then reset, when
// nothing more is to be processed or the filter is destroyed with the attempt
// (Filter::onDestroy, closeStream).
type attemptStream struct {
	cfg       *AttemptExtProc
	ctx       context.Context
	stream    extprocsvc.ExternalProcessor_ProcessClient
	cancel    context.CancelFunc
	replies   chan recvResult
	sentFirst bool
	// complete: the server closed the stream (or an immediate response or a failure
	// ended processing): nothing more is sent.
	complete bool
	endOnce  sync.Once
	slot     *upstream
}

// openAttemptStream opens the stream on the filter's gRPC cluster with the configured
// initial metadata. The stream holds one of that cluster's circuit-breaker slots.
func (f *Front) openAttemptStream(ctx context.Context, cfg *AttemptExtProc) (*attemptStream, error) {
	up := f.clusters.get(cfg.Cluster)
	if up == nil || !up.acquire() {
		return nil, status.Error(codes.Unavailable, "ext_proc cluster overflow")
	}
	conn, err := f.grpcConn(cfg.Cluster)
	if err != nil {
		up.release()
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	sctx, cancel := context.WithCancel(ctx)
	for _, h := range cfg.InitialMetadata {
		sctx = metadata.AppendToOutgoingContext(sctx, h.Key, h.Value)
	}
	s, err := extprocsvc.NewExternalProcessorClient(conn).Process(sctx)
	if err != nil {
		cancel()
		up.release()
		return nil, err
	}
	st := &attemptStream{cfg: cfg, ctx: ctx, stream: s, cancel: cancel, replies: make(chan recvResult, 16), slot: up}
	go func() {
		for {
			resp, err := s.Recv()
			select {
			case st.replies <- recvResult{resp, err}:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return st, nil
}

// end closes the stream as Envoy does: half-close, then reset; its circuit-breaker
// slot is given back.
func (st *attemptStream) end() {
	st.endOnce.Do(func() {
		st.complete = true
		_ = st.stream.CloseSend()
		st.cancel()
		st.slot.release()
	})
}

// send sends one message unless processing is complete; the first carries
// protocol_config (the configured body modes) and metadata_context, as the
// connection manager's ext_proc does.
func (st *attemptStream) send(req *extprocsvc.ProcessingRequest) {
	if st.complete {
		return
	}
	if !st.sentFirst {
		st.sentFirst = true
		req.ProtocolConfig = &extprocsvc.ProtocolConfiguration{
			RequestBodyMode: extprocv3.ProcessingMode_NONE, ResponseBodyMode: extprocv3.ProcessingMode_NONE,
		}
		req.MetadataContext = &corev3.Metadata{}
	}
	_ = st.stream.Send(req)
}

// await waits for the reply to the last message, as exchange.await does for the
// connection manager's ext_proc: message_timeout, gRPC errors, a close by the server,
// immediate responses and spurious replies. With no max_message_timeout configured an
// override_message_timeout is consumed and ignored (Filter::onNewTimeout). No
// receiving_namespaces are configured, so dynamic metadata in a reply is ignored.
func (st *attemptStream) await(want func(*extprocsvc.ProcessingResponse) bool) awaitResult {
	if st.complete {
		return awaitResult{st: awaitClosed}
	}
	timer := time.NewTimer(st.cfg.MessageTimeout)
	defer timer.Stop()
	for {
		select {
		case <-st.ctx.Done():
			st.end()
			return awaitResult{st: awaitCanceled}
		case <-timer.C:
			st.end()
			return awaitResult{st: awaitFailed, status: http.StatusGatewayTimeout, details: detailsMessageTimeout}
		case rr := <-st.replies:
			switch {
			case errors.Is(rr.err, io.EOF):
				st.complete = true
				return awaitResult{st: awaitClosed}
			case rr.err != nil:
				st.end()
				if st.ctx.Err() != nil {
					return awaitResult{st: awaitCanceled}
				}
				return awaitResult{st: awaitFailed, status: http.StatusInternalServerError,
					details: grpcErrorDetails(int(status.Code(rr.err)))}
			}
			if rr.resp.GetOverrideMessageTimeout() != nil {
				continue
			}
			if rr.resp.GetImmediateResponse() != nil {
				st.end()
				return awaitResult{st: awaitImmediate, resp: rr.resp}
			}
			if !want(rr.resp) {
				st.end()
				return awaitResult{st: awaitFailed, status: http.StatusInternalServerError, details: detailsSpurious}
			}
			return awaitResult{st: awaitReply, resp: rr.resp}
		}
	}
}

// grpcConn returns the gRPC connection to a static cluster's endpoint: the ext_proc
// connection for its own cluster, else one dialed on first use and kept.
func (f *Front) grpcConn(cluster string) (*grpc.ClientConn, error) {
	if cluster == f.cfg.ExtProc.Cluster {
		return f.conn, nil
	}
	f.grpcMu.Lock()
	defer f.grpcMu.Unlock()
	if c := f.grpcConns[cluster]; c != nil {
		return c, nil
	}
	cl := f.cfg.Clusters[cluster]
	if cl == nil {
		return nil, fmt.Errorf("no static cluster %s", cluster)
	}
	c, err := grpc.NewClient("passthrough:///"+cl.Addr, grpcDialOptions()...)
	if err != nil {
		return nil, err
	}
	if f.grpcConns == nil {
		f.grpcConns = map[string]*grpc.ClientConn{}
	}
	f.grpcConns[cluster] = c
	return c, nil
}
