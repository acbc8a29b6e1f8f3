package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/authn"
)

// TokenSets are the bearer tokens accepted per role. More than one token of a role is
// accepted at once so that a token can be rotated without an outage: add the new one,
// roll the callers, remove the old one (deploy/README.md, "Rotating credentials").
type TokenSets struct {
	Service []string
	Admin   []string
}

// loadTokens reads a role's tokens: from file when file is not empty (one token per
// line; blank lines and lines starting with '#' skipped), else from the environment
// variable env (comma-separated). Surrounding whitespace is trimmed. The content never
// appears in errors.
func loadTokens(file, env string, getenv func(string) string) ([]string, error) {
	var parts []string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
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

// Validate reports every problem at once: each role needs at least one token, every
// token must pass authn's rules, and no token may serve both roles.
func (t TokenSets) Validate() error {
	var errs []error
	if len(t.Service) == 0 {
		errs = append(errs, fmt.Errorf("service token missing (set %s or --service-token-file)", authn.EnvServiceToken))
	}
	if len(t.Admin) == 0 {
		errs = append(errs, fmt.Errorf("admin token missing (set %s or --admin-token-file)", authn.EnvAdminToken))
	}
	for _, s := range t.Service {
		if len(s) < authn.MinTokenLength {
			errs = append(errs, fmt.Errorf("service token shorter than %d bytes", authn.MinTokenLength))
			break
		}
	}
	for _, a := range t.Admin {
		if len(a) < authn.MinTokenLength {
			errs = append(errs, fmt.Errorf("admin token shorter than %d bytes", authn.MinTokenLength))
			break
		}
	}
	for _, s := range t.Service {
		for _, a := range t.Admin {
			if s == a {
				errs = append(errs, errors.New("service and admin tokens must differ"))
			}
		}
	}
	return errors.Join(errs...)
}

// multiAuthorizer accepts any token of either set. It is built from authn.Authorizers
// (one per pairing of the sets, so every token is in one of them), which keeps the
// constant-time comparison and the role rules in authn; a token's role is the highest
// any of them gives.
type multiAuthorizer struct {
	azs []*authn.Authorizer
}

func newMultiAuthorizer(t TokenSets) (*multiAuthorizer, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	n := max(len(t.Service), len(t.Admin))
	m := &multiAuthorizer{}
	for i := range n {
		az, err := authn.NewAuthorizer(authn.Tokens{
			Service: t.Service[min(i, len(t.Service)-1)],
			Admin:   t.Admin[min(i, len(t.Admin)-1)],
		})
		if err != nil {
			return nil, err
		}
		m.azs = append(m.azs, az)
	}
	return m, nil
}

// roleOf runs every comparison (no early exit) and returns the highest role.
func (m *multiAuthorizer) roleOf(token string) authn.Role {
	role := authn.RoleNone
	for _, az := range m.azs {
		if r := az.RoleOf(token); r > role {
			role = r
		}
	}
	return role
}

// errUnauthenticated is authn's one answer to every refused credential.
var errUnauthenticated = status.Error(codes.Unauthenticated, "unauthenticated")

func (m *multiAuthorizer) check(ctx context.Context, fullMethod string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if !authn.Allowed(m.roleOf(authn.BearerToken(md)), fullMethod) {
		return errUnauthenticated
	}
	return nil
}

// serverOptions are the interceptors that admit a call only with a token of the role
// its method needs.
func (m *multiAuthorizer) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := m.check(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := m.check(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}
