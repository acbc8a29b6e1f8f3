package console

// Signing in: the admin token is checked by asking accounting for something only an
// admin may read. Failed attempts are bounded per client address, and logged.

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/internal/faillimit"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// SignInFailures bounds failed sign-ins per client address: Burst failures at once,
// then one more per Every; at most Addresses addresses are remembered. Zero fields take
// the defaults (DefaultSignIn*). Behind an ingress every client has the ingress's
// address, so the bound is then shared by all.
type SignInFailures struct {
	Burst     int
	Every     time.Duration
	Addresses int
}

// Defaults of SignInFailures: ten tries, then one per six seconds (ten a minute).
const (
	DefaultSignInBurst     = 10
	DefaultSignInEvery     = 6 * time.Second
	DefaultSignInAddresses = 10_000
)

// signInGuard holds the failure buckets. Safe for concurrent use.
type signInGuard struct {
	lim *faillimit.Limiter
	now func() time.Time
}

func newSignInGuard(c SignInFailures, now func() time.Time) *signInGuard {
	if c.Burst <= 0 {
		c.Burst = DefaultSignInBurst
	}
	if c.Every <= 0 {
		c.Every = DefaultSignInEvery
	}
	if c.Addresses <= 0 {
		c.Addresses = DefaultSignInAddresses
	}
	return &signInGuard{lim: faillimit.New(c.Burst, float64(time.Second)/float64(c.Every), c.Addresses), now: now}
}

// clientAddr is the address a request came from, without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// signInData is the sign-in page's data: the admin token's file to name, and whether
// people sign in with the company's provider.
type signInData struct {
	TokenFile string
	SSO       bool
}

func (s *Server) signInPage(w http.ResponseWriter, status int, msg string) {
	render(w, status, "signin", page{Title: "Sign in", Error: msg, Data: signInData{TokenFile: s.opts.AdminTokenFile, SSO: s.sso != nil}})
}

func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	addr := clientAddr(r)
	// Checked before the token is read or accounting is asked.
	if wait := s.signIns.lim.Blocked(addr, s.signIns.now()); wait > 0 {
		s.log.Warn("console sign-in refused", zap.String("remote", addr), zap.String("why", "too many failed attempts"))
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		s.signInPage(w, http.StatusTooManyRequests, "Too many failed sign-ins from this address: wait a little and try again.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	se := &session{token: token}
	fail := func(why, msg string) {
		s.signIns.lim.Failed(addr, s.signIns.now())
		s.log.Warn("console sign-in refused", zap.String("remote", addr), zap.String("why", why))
		s.signInPage(w, http.StatusUnauthorized, msg)
	}
	if token == "" {
		fail("no token", "Enter the admin token.")
		return
	}
	if _, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListTiersResponse, error) {
		return s.admin.ListTiers(ctx, &accountingv1.ListTiersRequest{}, o)
	}); err != nil {
		fail(status.Code(err).String(), plainWords(err))
		return
	}
	se = s.sessions.create(w, r, token)
	s.log.Info("console sign-in", zap.String("operator", se.operator), zap.String("remote", addr))
	http.Redirect(w, r, "/accounts", http.StatusSeeOther)
}
