// Package client dials the accounting gRPC service with a bearer token, for any Go code
// of the gateway that calls it (extproc, gatewayctl, tests).
//
// It knows nothing of the ledger: callers wrap the returned connection in
// accountingv1.NewLedgerServiceClient or NewAdminServiceClient.
package client

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Window and ConnWindow are the HTTP/2 receive windows of every connection to accounting,
// on both ends (per call, per connection; Dial sets them, and accounting's server takes
// the same). Ledger messages are a few hundred bytes. Fixed windows turn grpc-go's
// bandwidth estimation off: with it, each end answered the first DATA frame after a round
// trip with a WINDOW_UPDATE and a PING of its own (google.golang.org/grpc
// internal/transport, handleData and bdpEstimator.add), an exchange more per call.
const (
	Window     = 1 << 20
	ConnWindow = 4 << 20
)

// TokenCredentials returns per-RPC credentials that send "authorization: Bearer <token>"
// on every call.
func TokenCredentials(token string) credentials.PerRPCCredentials {
	return bearer(token)
}

type bearer string

var _ credentials.PerRPCCredentials = bearer("")

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false so that the token can travel over plaintext
// loopback. In production, pass TLS transport credentials through opts (they replace
// the insecure default) or run accounting behind a mesh that provides mTLS.
func (b bearer) RequireTransportSecurity() bool { return false }

// Dial returns a client connection to the accounting service at addr that presents
// token on every call. The connection is established lazily, on the first call; ctx is
// only checked for cancellation. Without options the transport is plaintext, which
// is meant for loopback; opts are applied after the defaults, so a
// grpc.WithTransportCredentials option switches to TLS.
func Dial(ctx context.Context, addr, token string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if addr == "" {
		return nil, errors.New("accounting address is empty")
	}
	if token == "" {
		return nil, errors.New("accounting token is empty")
	}
	all := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(token)),
		grpc.WithInitialWindowSize(Window), grpc.WithInitialConnWindowSize(ConnWindow),
	}, opts...)
	return grpc.NewClient(addr, all...)
}
