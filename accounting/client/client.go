// Package client dials the accounting gRPC service with a bearer token, for any Go code
// of the gateway that calls it (extproc, gatewayctl, tests).
//
// It knows nothing of the ledger: callers wrap the returned connection in
// accountingv1.NewLedgerServiceClient or NewAdminServiceClient.
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
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

// MaxReconnectDelay bounds the wait between two attempts to reconnect to accounting.
// gRPC's default back-off grows to 120 s, so a client that lost accounting for a minute
// stayed away for up to two more after it returned: long enough for the holds its
// settlements were waiting on to expire. With the bound, a caller is back within about a
// second of accounting (client.Reconnect).
const MaxReconnectDelay = time.Second

// Reconnect is the back-off of every connection to accounting (Dial sets it; a caller
// that dials otherwise, as the web console does, passes it): attempts 100 ms apart at
// first, growing by 1.6 with 20 % jitter to MaxReconnectDelay. An attempt is given at
// least 5 s to connect, so that a stalled accounting (a paused process that accepts
// but never answers) is given up on and tried again, not waited on for gRPC's 20 s.
func Reconnect() grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay:  100 * time.Millisecond,
			Multiplier: backoff.DefaultConfig.Multiplier,
			Jitter:     backoff.DefaultConfig.Jitter,
			MaxDelay:   MaxReconnectDelay,
		},
		MinConnectTimeout: 5 * time.Second,
	})
}

// TokenCredentials returns per-RPC credentials that send "authorization: Bearer <token>"
// on every call.
func TokenCredentials(token string) credentials.PerRPCCredentials {
	return bearer("Bearer " + token)
}

// bearer is the authorization header's value, "Bearer <token>", made once rather than
// on every call.
type bearer string

// PersonMetadata is the gRPC metadata that names the person a call is made for (their
// email, query-escaped), sent by a caller that signs people in itself (the console)
// beside its own credential. Accounting trusts it only from a caller whose credential
// may name a person, and then authorizes the call by that person's membership.
const PersonMetadata = "x-gateway-person"

// ViaMetadata says which tool a call without a person comes from ("gatewayctl"),
// for the audit log; a call that names none is from "api".
const ViaMetadata = "x-gateway-via"

// PersonCredentials returns per-RPC credentials that send the caller's token and name
// person (PersonMetadata) on every call.
func PersonCredentials(token, person string) credentials.PerRPCCredentials {
	return personBearer{token: token, person: person}
}

type personBearer struct{ token, person string }

func (p personBearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + p.token, PersonMetadata: url.QueryEscape(p.person)}, nil
}

func (p personBearer) RequireTransportSecurity() bool { return false }

var _ credentials.PerRPCCredentials = bearer("")

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": string(b)}, nil
}

// RequireTransportSecurity is false so that the token can travel over plaintext
// loopback. In production, pass TLS transport credentials through opts (they replace
// the insecure default) or run accounting behind a mesh that provides mTLS.
func (b bearer) RequireTransportSecurity() bool { return false }

// Dial returns a client connection to the accounting service at addr that presents
// token on every call. addr is a gRPC target (host:port, or dns:///name:port, which
// resolves to every replica behind the name) or a comma-separated list of host:port
// addresses, one per replica, for replicas no name resolves to (ListScheme). The
// connection is established lazily, on the first call, and re-established with the
// bounded back-off of Reconnect; ctx is only checked for
// cancellation. Without options the transport is plaintext, which is meant for
// loopback; opts are applied after the defaults, so a grpc.WithTransportCredentials
// option switches to TLS. Which replica a call goes to is the connection's
// load-balancing policy's choice (grpc-go's default, pick_first, uses the first that
// answers; extproc's ledger client asks for round_robin).
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
	all := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(TokenCredentials(token)),
		grpc.WithInitialWindowSize(Window), grpc.WithInitialConnWindowSize(ConnWindow),
		Reconnect(),
	}
	if strings.Contains(addr, ",") {
		target, resolve, err := listTarget(addr)
		if err != nil {
			return nil, err
		}
		addr = target
		all = append(all, resolve)
	}
	return grpc.NewClient(addr, append(all, opts...)...)
}

// ListScheme is the scheme of the target Dial makes of a list of addresses: a resolver
// of this connection's own (grpc-go's resolver/manual) that resolves to every address
// of the list, and to nothing else, ever.
const ListScheme = "accounting-list"

// listTarget returns the target and the resolver option for a comma-separated list of
// host:port addresses.
func listTarget(list string) (string, grpc.DialOption, error) {
	addrs, err := listAddresses(list)
	if err != nil {
		return "", nil, err
	}
	r := manual.NewBuilderWithScheme(ListScheme)
	r.InitialState(resolver.State{Addresses: addrs})
	return ListScheme + ":///accounting", grpc.WithResolvers(r), nil
}

// listAddresses parses a comma-separated list of host:port addresses. Each address's
// ServerName is its host, so that TLS checks each replica's certificate against the name
// it was dialled by, as a dial of that address alone would (the list is the operator's
// configuration, never a client's).
func listAddresses(list string) ([]resolver.Address, error) {
	var addrs []resolver.Address
	for a := range strings.SplitSeq(list, ",") {
		a = strings.TrimSpace(a)
		host, _, err := net.SplitHostPort(a)
		if err == nil && host == "" {
			err = errors.New("no host")
		}
		if err != nil {
			return nil, fmt.Errorf("accounting address list %q: %q: %w", list, a, err)
		}
		addrs = append(addrs, resolver.Address{Addr: a, ServerName: host})
	}
	return addrs, nil
}
