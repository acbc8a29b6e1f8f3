package ledger

import (
	"context"
	"time"
)

// Webhook is an account's subscription to alert events (accounting/alerts delivers
// them).
type Webhook struct {
	ID           string
	AccountID    string
	URL          string
	Events       []string // empty: every type
	Secret       string   // only when created: "whsec_…"
	AllowPrivate bool
	CreatedAt    time.Time
}

// WebhookDelivery is one event's delivery to one webhook.
type WebhookDelivery struct {
	EventID       string
	Type          string
	Attempts      int
	LastStatus    *int // nil before the first attempt; 0 when no HTTP answer came
	DeliveredAt   *time.Time
	NextAttemptAt *time.Time // nil once delivered or given up
}

// Webhooks keeps the webhook subscriptions. Refusals are Refusals with
// ReasonInvalidArgument; an unknown webhook is ErrNotFound.
type Webhooks interface {
	// CreateWebhook subscribes; the caller checks that the account exists.
	CreateWebhook(ctx context.Context, accountID, url string, events []string, allowPrivate bool) (Webhook, error)
	ListWebhooks(ctx context.Context, accountID string) ([]Webhook, error)
	// GetWebhook returns a webhook that is not deleted, without its secret, or ErrNotFound.
	GetWebhook(ctx context.Context, id string) (Webhook, error)
	DeleteWebhook(ctx context.Context, id string) error
	// TestWebhook queues a webhook.test event for the webhook and returns its id.
	TestWebhook(ctx context.Context, id string) (string, error)
	WebhookDeliveries(ctx context.Context, id string, limit int) ([]WebhookDelivery, error)
}
