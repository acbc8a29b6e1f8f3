package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// The alert webhooks: subscriptions kept by Options.Webhooks, for accounts the ledger
// knows.

// maxDeliveries bounds one ListWebhookDeliveries answer.
const maxDeliveries = 500

func (a *AdminServer) webhooks() (ledger.Webhooks, error) {
	if a.s.hooks == nil {
		return nil, status.Error(codes.Unimplemented, "this accounting serves no webhooks")
	}
	return a.s.hooks, nil
}

func webhookToProto(h ledger.Webhook) *accountingv1.Webhook {
	events := h.Events
	if events == nil {
		events = []string{}
	}
	return &accountingv1.Webhook{Id: h.ID, AccountId: h.AccountID, Url: h.URL, Events: events, Secret: h.Secret,
		AllowPrivate: h.AllowPrivate, CreatedAt: contract.Timestamp(h.CreatedAt)}
}

// CreateWebhook subscribes an account the ledger knows.
func (a *AdminServer) CreateWebhook(ctx context.Context, req *accountingv1.CreateWebhookRequest) (*accountingv1.CreateWebhookResponse, error) {
	hooks, err := a.webhooks()
	if err != nil {
		return nil, err
	}
	switch {
	case req.GetAccountId() == "":
		return nil, invalidArgument("account_id is required")
	case req.GetUrl() == "":
		return nil, invalidArgument("url is required")
	}
	acc, err := a.s.store.GetAccount(ctx, req.GetAccountId())
	if err != nil {
		return nil, a.s.fail(ctx, "CreateWebhook", err)
	}
	h, err := hooks.CreateWebhook(ctx, acc.ID, req.GetUrl(), req.GetEvents(), req.GetAllowPrivate())
	if err != nil {
		return nil, a.s.fail(ctx, "CreateWebhook", err)
	}
	return &accountingv1.CreateWebhookResponse{Webhook: webhookToProto(h)}, nil
}

// ListWebhooks lists an account's webhooks without their secrets.
func (a *AdminServer) ListWebhooks(ctx context.Context, req *accountingv1.ListWebhooksRequest) (*accountingv1.ListWebhooksResponse, error) {
	hooks, err := a.webhooks()
	if err != nil {
		return nil, err
	}
	if req.GetAccountId() == "" {
		return nil, invalidArgument("account_id is required")
	}
	if _, err := a.s.store.GetAccount(ctx, req.GetAccountId()); err != nil {
		return nil, a.s.fail(ctx, "ListWebhooks", err)
	}
	hs, err := hooks.ListWebhooks(ctx, req.GetAccountId())
	if err != nil {
		return nil, a.s.fail(ctx, "ListWebhooks", err)
	}
	out := &accountingv1.ListWebhooksResponse{Webhooks: make([]*accountingv1.Webhook, 0, len(hs))}
	for _, h := range hs {
		h.Secret = ""
		out.Webhooks = append(out.Webhooks, webhookToProto(h))
	}
	return out, nil
}

// DeleteWebhook unsubscribes a webhook.
func (a *AdminServer) DeleteWebhook(ctx context.Context, req *accountingv1.DeleteWebhookRequest) (*accountingv1.DeleteWebhookResponse, error) {
	hooks, err := a.webhooks()
	if err != nil {
		return nil, err
	}
	if req.GetWebhookId() == "" {
		return nil, invalidArgument("webhook_id is required")
	}
	if err := hooks.DeleteWebhook(ctx, req.GetWebhookId()); err != nil {
		return nil, a.s.fail(ctx, "DeleteWebhook", err)
	}
	return &accountingv1.DeleteWebhookResponse{}, nil
}

// TestWebhook sends a webhook.test event.
func (a *AdminServer) TestWebhook(ctx context.Context, req *accountingv1.TestWebhookRequest) (*accountingv1.TestWebhookResponse, error) {
	hooks, err := a.webhooks()
	if err != nil {
		return nil, err
	}
	if req.GetWebhookId() == "" {
		return nil, invalidArgument("webhook_id is required")
	}
	id, err := hooks.TestWebhook(ctx, req.GetWebhookId())
	if err != nil {
		return nil, a.s.fail(ctx, "TestWebhook", err)
	}
	return &accountingv1.TestWebhookResponse{EventId: id}, nil
}

// ListWebhookDeliveries lists a webhook's deliveries, newest first.
func (a *AdminServer) ListWebhookDeliveries(ctx context.Context, req *accountingv1.ListWebhookDeliveriesRequest) (*accountingv1.ListWebhookDeliveriesResponse, error) {
	hooks, err := a.webhooks()
	if err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	switch {
	case req.GetWebhookId() == "":
		return nil, invalidArgument("webhook_id is required")
	case limit < 0 || limit > maxDeliveries:
		return nil, invalidArgument("limit is 1 to 500")
	case limit == 0:
		limit = 20
	}
	ds, err := hooks.WebhookDeliveries(ctx, req.GetWebhookId(), limit)
	if err != nil {
		return nil, a.s.fail(ctx, "ListWebhookDeliveries", err)
	}
	out := &accountingv1.ListWebhookDeliveriesResponse{Deliveries: make([]*accountingv1.WebhookDelivery, 0, len(ds))}
	for _, d := range ds {
		p := &accountingv1.WebhookDelivery{EventId: d.EventID, Type: d.Type, Attempts: int32(d.Attempts)}
		if d.LastStatus != nil {
			s := int32(*d.LastStatus)
			p.LastStatus = &s
		}
		if d.DeliveredAt != nil {
			p.DeliveredAt = contract.Timestamp(*d.DeliveredAt)
		}
		if d.NextAttemptAt != nil {
			p.NextAttemptAt = contract.Timestamp(*d.NextAttemptAt)
		}
		out.Deliveries = append(out.Deliveries, p)
	}
	return out, nil
}

func ptrTo[T any](v T) *T { return &v }
