// Package console is the operators' web console: accounts, keys, usage, statements and
// tiers in the browser, on the accounting service's console operations (its gRPC
// AdminService). Pages are rendered on the server (html/template, embedded); there is no
// script at all, so the Content-Security-Policy forbids every one.
//
// An operator signs in with the admin token. The token stays on the server, in the
// session (a random id in an HttpOnly, SameSite=Strict cookie, Secure over TLS or when
// Options.SecureCookie says an ingress terminates TLS), and is presented to accounting
// on each call made for that session: the console itself holds no credential. Every
// form carries the session's CSRF token; a form that changes money or mints a secret
// (top-up, new key) also carries a one-time token of its own (forms.go). Secrets — the
// admin token and a new key's secret, shown once — never appear in a URL or a log.
// Failed sign-ins and every change are logged (audit.go). Amounts are integer micros
// shown as credits with six decimals. Bodies are capped (MaxBody) and sign-in failures
// are bounded per client address (signin.go).
//
// It imports the accounting client, ledger formatting and the generated proto only:
// never the store.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"time"

	"go.uber.org/zap"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

//go:embed web
var webFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"credits":   func(m int64) string { return ledger.FormatCredits6(m) },
	"day":       func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"allowlist": allowlistText,
	"limits":    limitsText,
	"expiry":    expiryText,
	"percent":   percentText,
	"neg":       func(n int) int { return -n },
}).ParseFS(webFS, "web/*.html"))

// callTimeout bounds each call to accounting.
const callTimeout = 10 * time.Second

// MaxBody is the most bytes of a request body the console reads: its forms are a few
// short fields (the longest, a key's allowlist, is bounded by accounting).
const MaxBody = 64 << 10

// Options configures a console; the zero value is the local stack's.
type Options struct {
	// Log receives failed sign-ins and every change (nil: nothing is logged).
	Log *zap.Logger
	// SecureCookie marks the session cookie Secure on every answer, for a console
	// behind an ingress that terminates TLS (the console then sees plain HTTP). Without
	// it the cookie is Secure when the console itself serves TLS.
	SecureCookie bool
	// AdminTokenFile, when set, is named on the sign-in page as where this deployment
	// keeps its admin token (the local stack's file). The console never reads it.
	AdminTokenFile string
	// SignInFailures bounds failed sign-ins per client address (zero fields: defaults).
	SignInFailures SignInFailures
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// SSO, when set, signs people in with the company's OpenID Connect provider
	// (sso.go); the admin-token sign-in stays for break-glass.
	SSO *SSO
	// AccountingToken is the console's own credential to accounting, presented on the
	// calls made for a signed-in person (who is named on each). Needed with SSO.
	AccountingToken string
	// SessionKey seals persons' sessions in their cookies (SessionKeyBytes). Nil:
	// derived from AccountingToken and the SSO client secret (DeriveSessionKey), the
	// same across restarts and replicas.
	SessionKey []byte
}

// Validate reports every problem with o at once.
func (o Options) Validate() error {
	if o.SSO == nil {
		return nil
	}
	var errs []error
	errs = append(errs, o.SSO.Validate())
	if o.AccountingToken == "" {
		errs = append(errs, errors.New("single sign-on needs the console's own credential to accounting (the accounting token file)"))
	}
	if o.SessionKey != nil && len(o.SessionKey) != SessionKeyBytes {
		errs = append(errs, fmt.Errorf("the session key must be %d bytes", SessionKeyBytes))
	}
	return errors.Join(errs...)
}

// Server is the console's HTTP handler.
type Server struct {
	admin    accountingv1.AdminServiceClient
	opts     Options
	log      *zap.Logger
	sessions *sessions
	sso      *sso
	signIns  *signInGuard
	mux      *http.ServeMux
}

// New returns a console over conn, a connection to accounting without credentials of
// its own (each call presents the signed-in operator's token, or for a person the
// console's AccountingToken naming the person). It panics when o is not valid
// (Options.Validate).
func New(conn grpc.ClientConnInterface, o Options) *Server {
	if err := o.Validate(); err != nil {
		panic("console: " + err.Error())
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var seal *sealer
	if o.SSO != nil {
		key := o.SessionKey
		if key == nil {
			var err error
			if key, err = DeriveSessionKey(o.AccountingToken, o.SSO.ClientSecret); err != nil {
				panic("console: " + err.Error())
			}
		}
		var err error
		if seal, err = newSealer(key); err != nil {
			panic(err.Error())
		}
	}
	s := &Server{admin: accountingv1.NewAdminServiceClient(conn), opts: o, log: o.Log,
		sessions: newSessions(o.Now, o.SecureCookie, seal, o.AccountingToken), signIns: newSignInGuard(o.SignInFailures, o.Now), mux: http.NewServeMux()}
	if o.SSO != nil {
		s.sso = newSSO(*o.SSO, o.Now)
	}
	s.routes()
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secureHeaders(http.HandlerFunc(s.capBody)).ServeHTTP(w, r)
}

// capBody refuses a body the console would not read whole: larger than MaxBody, or a
// POST that is not a plain form (nothing here takes uploads, so nothing is spooled to
// disk). Every form is parsed here, before a handler runs.
func (s *Server) capBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > MaxBody {
		render(w, http.StatusRequestEntityTooLarge, "error", page{Title: "Refused", Error: "The form is too large."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	if r.Method == http.MethodPost {
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
			render(w, http.StatusUnsupportedMediaType, "error", page{Title: "Refused", Error: "The console takes plain forms only."})
			return
		}
		if err := r.ParseForm(); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				render(w, http.StatusRequestEntityTooLarge, "error", page{Title: "Refused", Error: "The form is too large."})
				return
			}
			render(w, http.StatusBadRequest, "error", page{Title: "Refused", Error: "The form could not be read."})
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// HTTPServer returns the console's HTTP server on addr, with every read and write
// bounded in time: a client that trickles its headers or body, or never reads the
// answer, holds a connection for at most these timeouts.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{Addr: addr, Handler: s, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 20 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 32 << 10}
}

// call runs f with the session's credential presented to accounting: the admin
// token, or for a person the console's own credential naming the person.
func call[T any](r *http.Request, se *session, f func(context.Context, grpc.CallOption) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	return f(ctx, grpc.PerRPCCredentials(se.credentials()))
}

// plainWords says what went wrong, for an operator.
func plainWords(err error) string {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.NotFound:
		return "Not found: " + st.Message()
	case codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists:
		return st.Message()
	case codes.Unauthenticated:
		return "The admin token was refused: sign in again."
	case codes.PermissionDenied:
		return "Your role may not do this."
	case codes.Unavailable, codes.DeadlineExceeded:
		return "The accounting service cannot be reached; try again."
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "The accounting service did not answer in time; try again."
	}
	return "The operation failed."
}

// page is what every template receives.
type page struct {
	Title string
	CSRF  string
	// Person is the signed-in person's email ("" for the admin token).
	Person string
	Error  string
	Note   string
	Data   any
}

func render(w http.ResponseWriter, status int, name string, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = pages.ExecuteTemplate(w, name, p)
}
