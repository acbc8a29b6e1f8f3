package console

// The account's webhooks page: each alert subscription (never its secret), its recent
// deliveries and their state, and a one-time form that sends it a webhook.test event.

import (
	"context"
	"net/http"
	"net/url"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// recentDeliveries is how many of a webhook's deliveries its page shows, newest first.
const recentDeliveries = 20

// webhooksPage is the webhooks page's data.
type webhooksPage struct {
	Account string
	Hooks   []webhookRow
}

// webhookRow is one webhook with its recent deliveries and the one-time token of its
// "send test event" form.
type webhookRow struct {
	*accountingv1.Webhook
	Deliveries []*accountingv1.WebhookDelivery
	TestForm   string
}

func (s *Server) webhooksPage(w http.ResponseWriter, r *http.Request, se *session) {
	id := r.PathValue("id")
	hooks, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListWebhooksResponse, error) {
		return s.admin.ListWebhooks(ctx, &accountingv1.ListWebhooksRequest{AccountId: id}, o)
	})
	if err != nil {
		if status.Code(err) == codes.PermissionDenied {
			refused(w, err)
			return
		}
		render(w, httpStatus(err), "error", page{Title: "Webhooks", Error: plainWords(err)})
		return
	}
	d := webhooksPage{Account: id}
	for _, h := range hooks.GetWebhooks() {
		h.Secret = "" // accounting never lists it; the page never shows it either way
		ds, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListWebhookDeliveriesResponse, error) {
			return s.admin.ListWebhookDeliveries(ctx, &accountingv1.ListWebhookDeliveriesRequest{WebhookId: h.GetId(), Limit: recentDeliveries}, o)
		})
		if err != nil {
			render(w, httpStatus(err), "error", page{Title: "Webhooks", Error: plainWords(err)})
			return
		}
		d.Hooks = append(d.Hooks, webhookRow{Webhook: h, Deliveries: ds.GetDeliveries(), TestForm: se.forms.issue()})
	}
	q := r.URL.Query()
	render(w, 200, "webhooks", page{Title: "Webhooks of account " + id, CSRF: se.csrf, Person: se.person,
		Error: q.Get("error"), Note: q.Get("note"), Data: d})
}

// testWebhook sends a webhook.test event once per rendered form, and shows its id.
func (s *Server) testWebhook(w http.ResponseWriter, r *http.Request, se *session) {
	id, hook := r.PathValue("id"), r.PathValue("webhook")
	path := "/accounts/" + url.PathEscape(id) + "/webhooks"
	form := r.PostFormValue("form")
	if why := se.forms.begin(form, ""); why != "" {
		s.auditRefused(r, se, "test webhook", hook, why)
		http.Redirect(w, r, path+"?"+url.Values{"error": {string(why)}}.Encode(), http.StatusSeeOther)
		return
	}
	res, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.TestWebhookResponse, error) {
		return s.admin.TestWebhook(ctx, &accountingv1.TestWebhookRequest{WebhookId: hook}, o)
	})
	se.forms.end(form, err == nil)
	s.audit(r, se, "test webhook", hook, err, zap.String("account", id), zap.String("event", res.GetEventId()))
	back(w, r, path, err, "Test event "+res.GetEventId()+" queued for webhook "+hook+".")
}
