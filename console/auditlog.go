package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// auditPage is a page of accounting's audit log: every change made through its admin
// API, newest first, of one account when Account is set.
type auditPage struct {
	Account    string
	Entries    []*accountingv1.AuditEntry
	NextBefore int64
}

func (s *Server) auditLog(w http.ResponseWriter, r *http.Request, se *session) {
	q := r.URL.Query()
	d := auditPage{Account: strings.TrimSpace(q.Get("account"))}
	before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
	res, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListAuditResponse, error) {
		return s.admin.ListAudit(ctx, &accountingv1.ListAuditRequest{AccountId: d.Account, BeforeId: max(before, 0), Limit: 50}, o)
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
