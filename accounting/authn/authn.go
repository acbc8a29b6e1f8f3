// Package authn holds the service credentials of the accounting gRPC API: the bearer
// tokens of each role, and the server interceptors that admit a call only with the right
// one.
//
// Two roles exist. The service token (extproc) may call LedgerService; the admin token
// (gatewayctl, the console) may call AdminService and LedgerService. A role may accept
// several tokens at once (TokenSets), so that a token is rotated without an outage.
// Tokens are compared in constant time, and a refused call says only "unauthenticated", never which token
// was expected or whether one was present. Tokens are never logged.
//
// The package knows the accounting service names but nothing of the ledger or the store.
package authn

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Environment variables that carry the tokens.
const (
	EnvServiceToken = "GATEWAY_SERVICE_TOKEN"
	EnvAdminToken   = "GATEWAY_ADMIN_TOKEN"
)

// MinTokenLength is the shortest token accepted, in bytes.
const MinTokenLength = 16

// Role is what a presented token is allowed to do.
type Role int

const (
	// RoleNone is no valid token.
	RoleNone Role = iota
	// RoleService may call LedgerService.
	RoleService
	// RoleAdmin may call AdminService and LedgerService.
	RoleAdmin
)

// Tokens are the two bearer tokens the service accepts.
type Tokens struct {
	Service string
	Admin   string
}

// Validate reports every problem with the tokens at once.
func (t Tokens) Validate() error { return t.sets().Validate() }

// sets is t as TokenSets; an empty token is a missing one.
func (t Tokens) sets() TokenSets {
	var s TokenSets
	if t.Service != "" {
		s.Service = []string{t.Service}
	}
	if t.Admin != "" {
		s.Admin = []string{t.Admin}
	}
	return s
}

// TokenSets are the bearer tokens accepted per role. More than one token of a role is
// accepted at once so that a token can be rotated without an outage: add the new one,
// roll the callers, remove the old one (docs/operations.md, "Rotating credentials").
type TokenSets struct {
	Service []string
	Admin   []string
}

// Validate reports every problem at once: each role needs at least one token, every
// token must be at least MinTokenLength bytes, and no token may serve both roles.
func (t TokenSets) Validate() error {
	var errs []error
	if len(t.Service) == 0 {
		errs = append(errs, fmt.Errorf("service token missing (set %s or --service-token-file)", EnvServiceToken))
	}
	if len(t.Admin) == 0 {
		errs = append(errs, fmt.Errorf("admin token missing (set %s or --admin-token-file)", EnvAdminToken))
	}
	for _, s := range t.Service {
		if len(s) < MinTokenLength {
			errs = append(errs, fmt.Errorf("service token shorter than %d bytes", MinTokenLength))
			break
		}
	}
	for _, a := range t.Admin {
		if len(a) < MinTokenLength {
			errs = append(errs, fmt.Errorf("admin token shorter than %d bytes", MinTokenLength))
			break
		}
	}
	for _, s := range t.Service {
		if slices.Contains(t.Admin, s) {
			errs = append(errs, errors.New("service and admin tokens must differ"))
			break
		}
	}
	return errors.Join(errs...)
}

// LoadTokens reads a role's tokens: from file when file is not empty (one token per
// line; blank lines and lines starting with '#' skipped), else from the environment
// variable env read with getenv (comma-separated). Surrounding whitespace is trimmed. A
// file with no token is an error; the content never appears in errors. During a rotation
// the file holds the new token first and the old one after it (docs/operations.md).
func LoadTokens(file, env string, getenv func(string) string) ([]string, error) {
	var parts []string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			// The path is not secret; the content never appears in errors.
			return nil, fmt.Errorf("read token file: %w", err)
		}
		parts = strings.Split(string(b), "\n")
	} else {
		parts = strings.Split(getenv(env), ",")
	}
	var out []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		out = append(out, p)
	}
	if file != "" && len(out) == 0 {
		return nil, fmt.Errorf("token file %s is empty", file)
	}
	return out, nil
}

// LoadToken is the token a client presents (extproc, gatewayctl): the first of
// LoadTokens, so a file in the rotation shape works for servers and clients alike; ""
// when env is unset and file is empty.
func LoadToken(file, env string, getenv func(string) string) (string, error) {
	toks, err := LoadTokens(file, env, getenv)
	if err != nil || len(toks) == 0 {
		return "", err
	}
	return toks[0], nil
}

// BearerToken extracts the token of an "authorization: Bearer <token>" metadata entry,
// or "" when there is none.
func BearerToken(md metadata.MD) string { return bearerOf(md.Get("authorization")) }

// bearerOf is the token of the first "Bearer <token>" of an authorization header's
// values, or "".
func bearerOf(values []string) string {
	for _, v := range values {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
		if ok && strings.EqualFold(scheme, "bearer") {
			return strings.TrimSpace(tok)
		}
	}
	return ""
}

// Authorizer checks the credentials of incoming calls. It is safe for concurrent use.
type Authorizer struct {
	service [][sha256.Size]byte
	admin   [][sha256.Size]byte
}

// NewAuthorizer returns an Authorizer for one token per role; the tokens must be valid.
func NewAuthorizer(t Tokens) (*Authorizer, error) { return NewSetAuthorizer(t.sets()) }

// NewSetAuthorizer returns an Authorizer that accepts every token of t, which must be
// valid.
func NewSetAuthorizer(t TokenSets) (*Authorizer, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	a := &Authorizer{}
	for _, s := range t.Service {
		a.service = append(a.service, sha256.Sum256([]byte(s)))
	}
	for _, s := range t.Admin {
		a.admin = append(a.admin, sha256.Sum256([]byte(s)))
	}
	return a, nil
}

// RoleOf returns the role of a presented token. Hashing first makes the comparison
// independent of the token's length; every comparison always runs.
func (a *Authorizer) RoleOf(token string) Role {
	if token == "" {
		return RoleNone
	}
	h := sha256.Sum256([]byte(token))
	isService, isAdmin := 0, 0
	for _, s := range a.service {
		isService |= subtle.ConstantTimeCompare(h[:], s[:])
	}
	for _, s := range a.admin {
		isAdmin |= subtle.ConstantTimeCompare(h[:], s[:])
	}
	switch {
	case isAdmin == 1:
		return RoleAdmin
	case isService == 1:
		return RoleService
	}
	return RoleNone
}

var ledgerPrefix = "/" + accountingv1.LedgerService_ServiceDesc.ServiceName + "/"

// Allowed reports whether role may call fullMethod. LedgerService needs the service or
// the admin role; every other method, AdminService included, needs the admin role.
func Allowed(role Role, fullMethod string) bool {
	switch {
	case role == RoleAdmin:
		return true
	case role == RoleService:
		return strings.HasPrefix(fullMethod, ledgerPrefix)
	}
	return false
}

// errUnauthenticated is the one answer to every refused credential: it does not say
// which token was expected, or whether one was sent.
var errUnauthenticated = status.Error(codes.Unauthenticated, "unauthenticated")

func (a *Authorizer) check(ctx context.Context, fullMethod string) error {
	// One header read, not a copy of the call's whole metadata: this runs on every call.
	if !Allowed(a.RoleOf(bearerOf(metadata.ValueFromIncomingContext(ctx, "authorization"))), fullMethod) {
		return errUnauthenticated
	}
	return nil
}

// UnaryInterceptor refuses unary calls without the credential their method needs.
func (a *Authorizer) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := a.check(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamInterceptor refuses streaming calls without the credential their method needs.
func (a *Authorizer) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := a.check(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// ServerOptions returns the interceptors as server options.
func (a *Authorizer) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(a.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(a.StreamInterceptor()),
	}
}
