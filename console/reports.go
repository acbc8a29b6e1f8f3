package console

// The reading pages: usage (chart, table, CSV), the statement (paged, CSV) and the tiers.

import (
	"context"
	"encoding/csv"
	"net/http"
	"net/url"
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
	Rows                  []*accountingv1.UsageRow
	Total                 *accountingv1.UsageRow
	Bars                  []bar
}

// bar is one bar of the usage chart (an inline SVG drawn on the server).
type bar struct {
	Label   string
	X, H, Y int
}

func (s *Server) usage(w http.ResponseWriter, r *http.Request, se *session) {
	q := r.URL.Query()
	d := usagePage{Account: r.PathValue("id"), From: q.Get("from"), To: q.Get("to"), By: q.Get("by")}
	group, ok := ledger.UsageGroupNamed(d.By)
	if !ok {
		group, d.By = ledger.ByDay, ledger.ByDay.String()
	}
	res, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.GetUsageResponse, error) {
		return s.admin.GetUsage(ctx, &accountingv1.GetUsageRequest{AccountId: d.Account, FromDay: d.From, ToDay: d.To, GroupBy: contract.UsageGroupToProto(group)}, o)
	})
	if err != nil {
		render(w, http.StatusBadRequest, "error", page{Title: "Usage", Error: plainWords(err)})
		return
	}
	d.Rows, d.Total = res.GetRows(), res.GetTotal()
	if q.Get("format") == "csv" {
		writeCSV(w, "usage-"+d.Account+".csv", []string{d.By, "requests", "input_tokens", "output_tokens", "charged"}, func(add func(...string)) {
			for _, row := range d.Rows {
				add(row.GetGroup(), strconv.FormatInt(row.GetRequests(), 10), strconv.FormatInt(row.GetInputTokens(), 10),
					strconv.FormatInt(row.GetOutputTokens(), 10), ledger.FormatCredits6(row.GetChargedMicros()))
			}
		})
		return
	}
	var top int64 = 1
	for _, row := range d.Rows {
		top = max(top, row.GetChargedMicros())
	}
	for i, row := range d.Rows {
		h := int(row.GetChargedMicros() * 100 / top)
		d.Bars = append(d.Bars, bar{Label: row.GetGroup(), X: 10 + i*60, H: h, Y: 110 - h})
	}
	render(w, 200, "usage", page{Title: "Usage", CSRF: se.csrf, Data: d})
}

func (s *Server) statement(w http.ResponseWriter, r *http.Request, se *session) {
	id := r.PathValue("id")
	before, _ := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	list := func(before int64, limit int32) (*accountingv1.ListLedgerEntriesResponse, error) {
		return call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListLedgerEntriesResponse, error) {
			return s.admin.ListLedgerEntries(ctx, &accountingv1.ListLedgerEntriesRequest{AccountId: id, Limit: limit, BeforeId: before}, o)
		})
	}
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
		writeCSV(w, "statement-"+id+".csv", []string{"id", "created_at", "kind", "amount", "key_id", "model", "input_tokens", "output_tokens", "reservation_id"}, func(add func(...string)) {
			for _, e := range all {
				add(strconv.FormatInt(e.GetId(), 10), e.GetCreatedAt().AsTime().UTC().Format(time.RFC3339), string(contract.EntryKindFromProto(e.GetKind())),
					ledger.FormatCredits6(e.GetAmountMicros()), e.GetKeyId(), e.GetModel(), strconv.FormatInt(e.GetInputTokens(), 10),
					strconv.FormatInt(e.GetOutputTokens(), 10), e.GetReservationId())
			}
		})
		return
	}
	res, err := list(before, 50)
	if err != nil {
		render(w, http.StatusBadRequest, "error", page{Title: "Statement", Error: plainWords(err)})
		return
	}
	render(w, 200, "statement", page{Title: "Statement", CSRF: se.csrf, Data: struct {
		Account string
		Res     *accountingv1.ListLedgerEntriesResponse
	}{id, res}})
}

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
	p := page{Title: "Tiers", CSRF: se.csrf, Error: r.URL.Query().Get("error"), Note: r.URL.Query().Get("note"), Data: res}
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
