package app

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/engine"
)

// forwardedHeader marks a call a standby forwarded, so that it is never forwarded twice
// (two standbys that each think the other owns would otherwise bounce it).
const forwardedHeader = "x-ledger-forwarded"

// forwardedMetadata are the caller's headers a forwarded call carries: its credentials
// (the owner checks them again), the person it is made for (the owner authorizes it),
// where it comes from (the owner's audit log says) and its trace.
var forwardedMetadata = []string{"authorization", client.PersonMetadata, client.ViaMetadata, "traceparent", "tracestate", "x-request-id"}

// forwarder answers the unary calls a standby receives: a caller that follows redirects
// (contract.RedirectHeader: extproc) is told where the owner is, nothing decided, and
// calls it there itself, so that its calls take one hop once it knows; any other caller
// (gatewayctl, the console: a few calls, often from short-lived processes that would
// learn for nothing) has its call sent on to the owner and its answer returned. It runs
// after the credentials check. Watch streams are neither: every replica serves them from
// the database's change feed.
type forwarder struct {
	engine *engine.Engine
	self   string
	// counted counts each call answered here for the owner (redirected: with its
	// address; else forwarded): calls that take a second hop.
	counted func(redirected bool)

	mu   sync.Mutex
	addr string
	conn *grpc.ClientConn
}

func (f *forwarder) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if f.engine.Owning() {
		return handler(ctx, req) // the owner's calls read no metadata here
	}
	addr := f.engine.OwnerAddr()
	if addr == "" || addr == f.self || len(metadata.ValueFromIncomingContext(ctx, forwardedHeader)) > 0 {
		return handler(ctx, req) // the engine answers, or says it is not the owner
	}
	if len(metadata.ValueFromIncomingContext(ctx, contract.RedirectHeader)) > 0 {
		f.counted(true)
		return nil, contract.NotOwnerStatus(addr)
	}
	reply, ok := newReply(info.FullMethod)
	if !ok {
		return handler(ctx, req)
	}
	conn, err := f.connTo(addr)
	if err != nil {
		return handler(ctx, req)
	}
	in, _ := metadata.FromIncomingContext(ctx)
	out := metadata.Pairs(forwardedHeader, "1")
	for _, k := range forwardedMetadata {
		if v := in.Get(k); len(v) > 0 {
			out.Set(k, v...)
		}
	}
	f.counted(false)
	if err := conn.Invoke(metadata.NewOutgoingContext(ctx, out), info.FullMethod, req, reply); err != nil {
		return nil, err
	}
	return reply, nil
}

// connTo is the connection to the owner at addr, made anew when the owner moved.
func (f *forwarder) connTo(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil && f.addr == addr {
		return f.conn, nil
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(client.Window), grpc.WithInitialConnWindowSize(client.ConnWindow), client.Reconnect())
	if err != nil {
		return nil, err
	}
	if f.conn != nil {
		_ = f.conn.Close()
	}
	f.conn, f.addr = conn, addr
	return conn, nil
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		_ = f.conn.Close()
	}
}

// newReply is an empty answer message of the gRPC method /pkg.Service/Method.
func newReply(fullMethod string) (proto.Message, bool) {
	service, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return nil, false
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return nil, false
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, false
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil || md.IsStreamingClient() || md.IsStreamingServer() {
		return nil, false
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, false
	}
	return mt.New().Interface(), true
}
