package console

// The reading pages: usage (chart, table, CSV), the statement (paged, CSV) and the tiers.

import (
	"context"
	"encoding/csv"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// usagePage is the usage page's data.
type usagePage struct {
	Account, From, To, By string
	// Project narrows the usage to a project and its descendants ("": the account).
	Project  string
	Projects []*accountingv1.Project
	Names    map[string]string
	Rows     []ledger.UsageRow
	Total    ledger.UsageRow
	Chart    chart
	// AccountUsage: the session may read the whole account's usage.
	AccountUsage bool
}

func (s *Server) usage(w http.ResponseWriter, r *http.Request, se *session) {
	q := r.URL.Query()
	d := usagePage{Account: r.PathValue("id"), From: q.Get("from"), To: q.Get("to"), By: q.Get("by"), Project: q.Get("project")}
	group, ok := ledger.UsageGroupNamed(d.By)
	if !ok {
		group, d.By = ledger.ByDay, ledger.ByDay.String()
	}
	res, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.GetUsageResponse, error) {
		return s.admin.GetUsage(ctx, &accountingv1.GetUsageRequest{AccountId: d.Account, ProjectId: d.Project, FromDay: d.From, ToDay: d.To,
			GroupBy: contract.UsageGroupToProto(group)}, o)
	})
	if err != nil {
		code := http.StatusBadRequest
		if c := httpStatus(err); c != http.StatusBadGateway {
			code = c
		}
		render(w, code, "error", page{Title: "Usage", Error: plainWords(err)})
		return
	}
	for _, row := range res.GetRows() {
		d.Rows = append(d.Rows, contract.UsageRowFromProto(row))
	}
	d.Total = contract.UsageRowFromProto(res.GetTotal())
	if q.Get("format") == "csv" {
		header := []string{d.By, "requests", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "charged"}
		if group == ledger.ByChannel {
			header = slices.Insert(header, 1, "upstream_model")
		}
		writeCSV(w, "usage-"+d.Account+".csv", header, func(add func(...string)) {
			for _, row := range d.Rows {
				f := []string{row.Group, itoa(row.Requests), itoa(row.InputTokens), itoa(row.OutputTokens),
					itoa(row.CacheReadTokens), itoa(row.CacheWriteTokens), ledger.FormatCredits6(row.Charged)}
				if group == ledger.ByChannel {
					f = slices.Insert(f, 1, row.UpstreamModel)
				}
				add(f...)
			}
		})
		return
	}
	d.Chart = usageChart(d.By, d.Rows)
	if ps, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListProjectsResponse, error) {
		return s.admin.ListProjects(ctx, &accountingv1.ListProjectsRequest{AccountId: d.Account}, o)
	}); err == nil {
		d.Projects, d.Names = ps.GetProjects(), projectNames(ps.GetProjects())
		slices.SortStableFunc(d.Projects, func(a, b *accountingv1.Project) int { return strings.Compare(d.Names[a.GetId()], d.Names[b.GetId()]) })
	}
	d.AccountUsage = s.allowed(r, se, &accountingv1.CheckAccessRequest{Method: "GetUsage", AccountId: d.Account})
	render(w, 200, "usage", page{Title: "Usage", CSRF: se.csrf, Person: se.person, Data: d})
}

func (s *Server) statement(w http.ResponseWriter, r *http.Request, se *session) {
	id := r.PathValue("id")
	before, _ := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	list := func(before int64, limit int32) (*accountingv1.ListLedgerEntriesResponse, error) {
		return call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListLedgerEntriesResponse, error) {
			return s.admin.ListLedgerEntries(ctx, &accountingv1.ListLedgerEntriesRequest{AccountId: id, Limit: limit, BeforeId: before}, o)
		})
	}
	keys, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListKeysResponse, error) {
		return s.admin.ListKeys(ctx, &accountingv1.ListKeysRequest{AccountId: id}, o)
	})
	if err != nil {
		render(w, http.StatusBadRequest, "error", page{Title: "Statement", Error: plainWords(err)})
		return
	}
	names := keyNames(keys.GetKeys())
	if r.URL.Query().Get("format") == "csv" {
		// The whole statement, newest first, page by page.
		var all []*accountingv1.LedgerEntry
		for b := int64(0); ; {
			res, err := list(b, 500)
			if err != nil {
				render(w, http.StatusBadRequest, "error", page{Title: "Statement", Error: plainWords(err)})
				return
			}
			all = append(all, res.GetEntries()...)
			if b = res.GetNextBeforeId(); b == 0 {
				break
			}
		}
		var entries []ledger.Entry
		for _, e := range all {
			entries = append(entries, contract.EntryFromProto(e))
		}
		writeCSV(w, "statement-"+id+".csv", statementHeader(), func(add func(...string)) {
			for _, e := range entries {
				add(statementRow(e, names[e.KeyID])...)
			}
		})
		return
	}
	res, err := list(before, 50)
	if err != nil {
		render(w, http.StatusBadRequest, "error", page{Title: "Statement", Error: plainWords(err)})
		return
	}
	d := statementPage{Account: id, NextBefore: res.GetNextBeforeId()}
	for _, pe := range res.GetEntries() {
		e := contract.EntryFromProto(pe)
		d.Entries = append(d.Entries, statementEntry{Entry: e, KeyName: names[e.KeyID]})
	}
	render(w, 200, "statement", page{Title: "Statement", CSRF: se.csrf, Person: se.person, Data: d})
}

// statementPage is the statement page's data.
type statementPage struct {
	Account    string
	Entries    []statementEntry
	NextBefore int64
}

// statementEntry is an entry with the name of its key (keyNames; empty for a top-up).
type statementEntry struct {
	ledger.Entry
	KeyName string
}

// statementHeader is the statement CSV's header: an entry's fields, then for each
// component its units, price per million and amount (empty when the charge has none).
func statementHeader() []string {
	h := []string{"id", "created_at", "kind", "amount", "key_id", "key_name", "model", "input_tokens", "output_tokens", "reservation_id",
		"channel", "upstream_model", "service_tier", "capped"}
	for _, n := range ledger.ComponentNames {
		h = append(h, n+"_units", n+"_price_per_mtok", n+"_amount")
	}
	return h
}

// statementRow is one entry, its key named keyName, as a CSV row, in statementHeader's
// columns.
func statementRow(e ledger.Entry, keyName string) []string {
	f := []string{strconv.FormatInt(e.ID, 10), e.CreatedAt.UTC().Format(time.RFC3339), string(e.Kind),
		ledger.FormatCredits6(e.Amount), e.KeyID, keyName, e.Model, itoa(e.InputTokens), itoa(e.OutputTokens), e.ReservationID,
		e.Channel, e.UpstreamModel, e.ServiceTier, strconv.FormatBool(e.Capped())}
	for _, n := range ledger.ComponentNames {
		i := slices.IndexFunc(e.Components, func(c ledger.Component) bool { return c.Name == n })
		if i < 0 {
			f = append(f, "", "", "")
			continue
		}
		c := e.Components[i]
		f = append(f, itoa(c.Units), itoa(c.PricePerMTok), ledger.FormatCredits6(c.Amount))
	}
	return f
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func writeCSV(w http.ResponseWriter, name string, header []string, rows func(add func(...string))) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	cw := csv.NewWriter(w)
	_ = cw.Write(header)
	rows(func(f ...string) { _ = cw.Write(f) })
	cw.Flush()
}

func (s *Server) tiers(w http.ResponseWriter, r *http.Request, se *session) {
	res, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListTiersResponse, error) {
		return s.admin.ListTiers(ctx, &accountingv1.ListTiersRequest{}, o)
	})
	p := page{Title: "Tiers", CSRF: se.csrf, Person: se.person, Error: r.URL.Query().Get("error"), Note: r.URL.Query().Get("note"), Data: res}
	if err != nil {
		p.Error = plainWords(err)
	}
	render(w, 200, "tiers", p)
}

func (s *Server) setTier(w http.ResponseWriter, r *http.Request, se *session) {
	tier, problems := tierFromForm(r)
	if len(problems) > 0 {
		http.Redirect(w, r, "/tiers?"+url.Values{"error": {strings.Join(problems, " ")}}.Encode(), http.StatusSeeOther)
		return
	}
	_, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.SetTierResponse, error) {
		return s.admin.SetTier(ctx, &accountingv1.SetTierRequest{Tier: tier}, o)
	})
	s.audit(r, se, "set tier", tier.GetName(), err, zap.Int32("rpm_before_topup", tier.GetRpmBeforeTopup()), zap.Int32("rpm_after_topup", tier.GetRpmAfterTopup()),
		zap.Int32("in_flight_general", tier.GetInFlightGeneral()), zap.Int32("in_flight_high_cost", tier.GetInFlightHighCost()))
	back(w, r, "/tiers", err, "Tier saved: new requests follow it within 3 s.")
}
