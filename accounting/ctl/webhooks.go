package ctl

import (
	"context"
	"strings"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Webhook is the JSON shape of a webhook; Secret only from webhook create.
type Webhook struct {
	ID           string   `json:"id"`
	AccountID    string   `json:"account_id"`
	URL          string   `json:"url"`
	Events       []string `json:"events"`
	Secret       string   `json:"secret,omitempty"`
	AllowPrivate bool     `json:"allow_private"`
	CreatedAt    *string  `json:"created_at"`
}

func webhookJSON(h *accountingv1.Webhook) Webhook {
	events := h.GetEvents()
	if events == nil {
		events = []string{}
	}
	return Webhook{ID: h.GetId(), AccountID: h.GetAccountId(), URL: h.GetUrl(), Events: events, Secret: h.GetSecret(),
		AllowPrivate: h.GetAllowPrivate(), CreatedAt: timeOrNil(h.GetCreatedAt())}
}

// Delivery is the JSON shape of a webhook delivery.
type Delivery struct {
	EventID       string  `json:"event_id"`
	Type          string  `json:"type"`
	Attempts      int32   `json:"attempts"`
	LastStatus    *int32  `json:"last_status"`
	DeliveredAt   *string `json:"delivered_at"`
	NextAttemptAt *string `json:"next_attempt_at"`
}

func webhookCreate(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	account, err := required(p, "webhook create", "account", "ID")
	if err != nil {
		return nil, err
	}
	url, err := required(p, "webhook create", "url", "URL")
	if err != nil {
		return nil, err
	}
	req := &accountingv1.CreateWebhookRequest{AccountId: account, Url: url, AllowPrivate: p.flags["allow-private"] == "true"}
	if p.has("events") {
		for _, e := range strings.Split(p.flags["events"], ",") {
			if e = strings.TrimSpace(e); e != "" {
				req.Events = append(req.Events, e)
			}
		}
		if len(req.Events) == 0 {
			return nil, usagef("--events names at least one event type")
		}
	}
	resp, err := c.CreateWebhook(ctx, req)
	if err != nil {
		return nil, err
	}
	return webhookJSON(resp.GetWebhook()), nil
}

func webhookList(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	account, err := required(p, "webhook list", "account", "ID")
	if err != nil {
		return nil, err
	}
	resp, err := c.ListWebhooks(ctx, &accountingv1.ListWebhooksRequest{AccountId: account})
	if err != nil {
		return nil, err
	}
	out := struct {
		Webhooks []Webhook `json:"webhooks"`
	}{Webhooks: []Webhook{}}
	for _, h := range resp.GetWebhooks() {
		out.Webhooks = append(out.Webhooks, webhookJSON(h))
	}
	return out, nil
}

func webhookDelete(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	if _, err := c.DeleteWebhook(ctx, &accountingv1.DeleteWebhookRequest{WebhookId: p.args[0]}); err != nil {
		return nil, err
	}
	return map[string]any{"id": p.args[0], "deleted": true}, nil
}

func webhookTest(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	resp, err := c.TestWebhook(ctx, &accountingv1.TestWebhookRequest{WebhookId: p.args[0]})
	if err != nil {
		return nil, err
	}
	return map[string]any{"id": p.args[0], "event_id": resp.GetEventId(), "type": "webhook.test"}, nil
}

func webhookDeliveries(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	req := &accountingv1.ListWebhookDeliveriesRequest{WebhookId: p.args[0]}
	if p.has("limit") {
		n, err := parseCount(p, "limit")
		if err != nil {
			return nil, err
		}
		req.Limit = n
	}
	resp, err := c.ListWebhookDeliveries(ctx, req)
	if err != nil {
		return nil, err
	}
	out := struct {
		Deliveries []Delivery `json:"deliveries"`
	}{Deliveries: []Delivery{}}
	for _, d := range resp.GetDeliveries() {
		out.Deliveries = append(out.Deliveries, Delivery{EventID: d.GetEventId(), Type: d.GetType(), Attempts: d.GetAttempts(),
			LastStatus: d.LastStatus, DeliveredAt: timeOrNil(d.GetDeliveredAt()), NextAttemptAt: timeOrNil(d.GetNextAttemptAt())})
	}
	return out, nil
}
