// Package console is the operators' web console: accounts, keys, usage, statements and
// tiers in the browser, on the accounting service's console operations (its gRPC
// AdminService). Pages are rendered on the server (html/template, embedded); there is no
// script at all, so the Content-Security-Policy forbids every one.
//
// An operator signs in with the admin token. The token stays on the server, in the
// session (a random id in an HttpOnly, SameSite=Strict cookie, Secure over TLS), and is
// presented to accounting on each call made for that session: the console itself holds
// no credential. Every form carries the session's CSRF token. Secrets — the admin token
// and a new key's secret, shown once — never appear in a URL or a log. Amounts are
// integer micros shown as credits with six decimals.
//
// It imports the accounting client, ledger formatting and the generated proto only:
// never the store.
package console

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

//go:embed web
var webFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"credits": func(m int64) string { return ledger.FormatCredits6(m) },
	"day":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
}).ParseFS(webFS, "web/*.html"))

// callTimeout bounds each call to accounting.
const callTimeout = 10 * time.Second

// Server is the console's HTTP handler.
type Server struct {
	admin    accountingv1.AdminServiceClient
	sessions *sessions
	mux      *http.ServeMux
}

// New returns a console over conn, a connection to accounting without credentials of
// its own (each call presents the signed-in operator's token).
func New(conn grpc.ClientConnInterface) *Server {
	s := &Server{admin: accountingv1.NewAdminServiceClient(conn), sessions: newSessions(time.Now), mux: http.NewServeMux()}
	s.routes()
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secureHeaders(s.mux).ServeHTTP(w, r)
}

// call runs f with the session's token presented to accounting.
func call[T any](r *http.Request, se *session, f func(context.Context, grpc.CallOption) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	return f(ctx, grpc.PerRPCCredentials(client.TokenCredentials(se.token)))
}

// plainWords says what went wrong, for an operator.
func plainWords(err error) string {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.NotFound:
		return "Not found: " + st.Message()
	case codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists:
		return st.Message()
	case codes.Unauthenticated, codes.PermissionDenied:
		return "The admin token was refused: sign in again."
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
	Error string
	Note  string
	Data  any
}

func render(w http.ResponseWriter, status int, name string, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = pages.ExecuteTemplate(w, name, p)
}
