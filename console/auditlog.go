package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/llmgw/gateway/accounting/contract"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// auditPage is a page of accounting's audit log: every change made through its admin
// API, newest first, of one account when Account is set, of one actor when Actor is.
type auditPage struct {
	Account    string
	Actor      string
	Entries    []*accountingv1.AuditEntry
	NextBefore int64
}

// auditQuery is the request a page's or an export's query selects.
func auditQuery(r *http.Request) *accountingv1.ListAuditRequest {
	q := r.URL.Query()
	before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
	return &accountingv1.ListAuditRequest{AccountId: strings.TrimSpace(q.Get("account")),
		Actor: strings.TrimSpace(q.Get("actor")), BeforeId: max(before, 0)}
}

func (s *Server) auditLog(w http.ResponseWriter, r *http.Request, se *session) {
	req := auditQuery(r)
	req.Limit = 50
	d := auditPage{Account: req.AccountId, Actor: req.Actor}
	res, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListAuditResponse, error) {
		return s.admin.ListAudit(ctx, req, o)
	})
	d.Entries, d.NextBefore = res.GetEntries(), res.GetNextBeforeId()
	p := page{Title: "Audit log", CSRF: se.csrf, Person: se.person, Data: d}
	code := http.StatusOK
	if err != nil {
		p.Error = plainWords(err)
		code = httpStatus(err)
	}
	render(w, code, "audit", p)
}

// auditExport downloads every entry the page's filters select, newest first, as JSON
// lines (contract.AuditRecord, as gatewayctl audit export prints them). A refusal of
// the first page is answered with its status; a failure after that aborts the
// response (no final chunk), so a client cannot take it for a complete download.
func (s *Server) auditExport(w http.ResponseWriter, r *http.Request, se *session) {
	req := auditQuery(r)
	list := func(req *accountingv1.ListAuditRequest) (*accountingv1.ListAuditResponse, error) {
		return call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListAuditResponse, error) {
			return s.admin.ListAudit(ctx, req, o)
		})
	}
	req.Limit = contract.AuditExportPage
	first, err := list(req)
	if err != nil {
		http.Error(w, plainWords(err), httpStatus(err))
		return
	}
	w.Header().Set("Content-Type", "application/jsonl; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="audit.jsonl"`)
	w.Header().Set("Cache-Control", "no-store")
	sent := false
	err = contract.ExportAudit(req, func(req *accountingv1.ListAuditRequest) (*accountingv1.ListAuditResponse, error) {
		if !sent {
			sent = true
			return first, nil
		}
		return list(req)
	}, w)
	if err != nil {
		s.log.Warn("audit export ended short", zap.Error(err))
		panic(http.ErrAbortHandler)
	}
}
