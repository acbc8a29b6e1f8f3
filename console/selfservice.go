package console

// Self-service for a project's members: the account page's new-key form offers only
// the projects in the person's sight (accounting lists no others), and a key outside
// any project only to whom accounting allows it; the usage page narrows to a
// project. Accounting decides every call; these only shape the forms.

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// allowed asks accounting whether the session may make the call req names
// (CheckAccess); the admin token may make every call. An outage answers false: the
// page then offers less, and the call itself would say why.
func (s *Server) allowed(r *http.Request, se *session, req *accountingv1.CheckAccessRequest) bool {
	if se.person == "" {
		return true
	}
	_, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.CheckAccessResponse, error) {
		return s.admin.CheckAccess(ctx, req, o)
	})
	return err == nil
}

// projectNames names each project with its ancestors, root first ("research /
// vision"); an ancestor out of the list (out of the person's sight) is left out.
func projectNames(ps []*accountingv1.Project) map[string]string {
	by := make(map[string]*accountingv1.Project, len(ps))
	for _, p := range ps {
		by[p.GetId()] = p
	}
	names := make(map[string]string, len(ps))
	for _, p := range ps {
		parts := []string{p.GetName()}
		for cur, n := by[p.GetParentId()], 0; cur != nil && n < 8; cur, n = by[cur.GetParentId()], n+1 {
			parts = append([]string{cur.GetName()}, parts...)
		}
		names[p.GetId()] = strings.Join(parts, " / ")
	}
	return names
}

// rates reads a new key's optional rpm and tpm (whole numbers, at least 1).
func rates(rpm, tpm string) (*int64, *int64, error) {
	read := func(v string) (*int64, error) {
		if v = strings.TrimSpace(v); v == "" {
			return nil, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return nil, errors.New("a rate is a whole number, at least 1")
		}
		return &n, nil
	}
	r, err := read(rpm)
	if err != nil {
		return nil, nil, err
	}
	t, err := read(tpm)
	return r, t, err
}

// percentText is spent as a whole percentage of limit, rounded down ("12"), for a
// project's spend against its limits; "" without a limit. A zero limit spent is 100.
func percentText(spent int64, limit *int64) string {
	switch {
	case limit == nil:
		return ""
	case *limit <= 0:
		return "100"
	}
	return strconv.FormatInt(spent*100 / *limit, 10)
}
