package alerts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/tables"
	urlguard "github.com/llmgw/gateway/extproc/webhook"
)

// Webhooks keeps the subscriptions in the ledger's database (table webhooks: not a
// ledger decision, and a secret sealed at rest must be re-sealable when its key
// rotates, which an append-only journal could not do).
type Webhooks struct {
	Pool  *pgxpool.Pool
	Keys  *Keys
	Guard *urlguard.Validator // the video webhook_url's rules; nil: a Validator with defaults
	// Random is the source of secrets; nil means crypto/rand.
	Random io.Reader
	Now    func() time.Time
}

var _ ledger.Webhooks = (*Webhooks)(nil)

// MaxWebhooksPerAccount bounds an account's subscriptions.
const MaxWebhooksPerAccount = 20

func (w *Webhooks) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func invalid(msg string) error { return ledger.Refuse(ledger.ReasonInvalidArgument, msg) }

// checkURL applies the video webhook_url's rules, or with allowPrivate only asks for an
// absolute http or https URL with a host.
func (w *Webhooks) checkURL(ctx context.Context, raw string, allowPrivate bool) error {
	if !allowPrivate {
		g := w.Guard
		if g == nil {
			g = &urlguard.Validator{}
		}
		if e := g.Check(ctx, raw); e != nil {
			return invalid(strings.ReplaceAll(e.Message, "'webhook_url'", "webhook url") +
				" (--allow-private lifts these rules for an operator's own receivers)")
		}
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(raw) > urlguard.MaxURLLen {
		return invalid("a webhook url is an absolute http or https URL")
	}
	return nil
}

func checkEvents(events []string) error {
	for _, e := range events {
		if !slices.Contains(Types, e) {
			return invalid(fmt.Sprintf("unknown event type %q (known: %s)", e, strings.Join(Types, ", ")))
		}
	}
	return nil
}

// Create subscribes accountID's url to events (none: all) with a new secret, returned
// once. The caller checks that the account exists.
func (w *Webhooks) CreateWebhook(ctx context.Context, accountID, rawURL string, events []string, allowPrivate bool) (ledger.Webhook, error) {
	if w.Keys == nil {
		return ledger.Webhook{}, ledger.Refuse(ledger.ReasonInvalidArgument, ErrNoKeys.Error())
	}
	if err := checkEvents(events); err != nil {
		return ledger.Webhook{}, err
	}
	if err := w.checkURL(ctx, rawURL, allowPrivate); err != nil {
		return ledger.Webhook{}, err
	}
	secret, err := NewSecret(w.Random)
	if err != nil {
		return ledger.Webhook{}, err
	}
	sealed, err := w.Keys.Seal(secret)
	if err != nil {
		return ledger.Webhook{}, err
	}
	h := ledger.Webhook{ID: uuid.NewString(), AccountID: accountID, URL: rawURL, Events: slices.Clone(events),
		Secret: secret, AllowPrivate: allowPrivate, CreatedAt: w.now().UTC().Truncate(time.Microsecond)}
	if h.Events == nil {
		h.Events = []string{}
	}
	full := invalid(fmt.Sprintf("an account has at most %d webhooks", MaxWebhooksPerAccount))
	err = tables.Audited(ctx, w.Pool, func(tx pgx.Tx) (before, after any, err error) {
		tag, err := tx.Exec(ctx, `
		INSERT INTO webhooks (id, account_id, url, events, secret, allow_private, created_at)
		SELECT $1, $2, $3, $4, $5, $6, $7
		WHERE (SELECT count(*) FROM webhooks WHERE account_id = $2 AND deleted_at IS NULL) < $8`,
			h.ID, h.AccountID, h.URL, h.Events, sealed, h.AllowPrivate, h.CreatedAt, MaxWebhooksPerAccount)
		if err != nil {
			return nil, nil, err
		}
		if tag.RowsAffected() == 0 {
			return nil, nil, full
		}
		return nil, h, nil
	})
	if errors.Is(err, full) {
		return ledger.Webhook{}, full
	}
	if err != nil {
		return ledger.Webhook{}, fmt.Errorf("alerts: create webhook: %w", err)
	}
	return h, nil
}

const webhookColumns = `id, account_id, url, events, allow_private, created_at`

func scanWebhook(row pgx.Row) (ledger.Webhook, error) {
	var h ledger.Webhook
	var id, acct uuid.UUID
	err := row.Scan(&id, &acct, &h.URL, &h.Events, &h.AllowPrivate, &h.CreatedAt)
	h.ID, h.AccountID, h.CreatedAt = id.String(), acct.String(), h.CreatedAt.UTC()
	return h, err
}

// GetWebhook returns a webhook that is not deleted, without its secret, or
// ledger.ErrNotFound.
func (w *Webhooks) GetWebhook(ctx context.Context, id string) (ledger.Webhook, error) {
	return w.get(ctx, id)
}

// get returns a webhook that is not deleted, or ledger.ErrNotFound.
func (w *Webhooks) get(ctx context.Context, id string) (ledger.Webhook, error) {
	if uuid.Validate(id) != nil {
		return ledger.Webhook{}, ledger.ErrNotFound
	}
	h, err := scanWebhook(w.Pool.QueryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = $1 AND deleted_at IS NULL`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Webhook{}, ledger.ErrNotFound
	}
	return h, err
}

// List returns accountID's webhooks, oldest first, without their secrets.
func (w *Webhooks) ListWebhooks(ctx context.Context, accountID string) ([]ledger.Webhook, error) {
	if uuid.Validate(accountID) != nil {
		return nil, ledger.ErrNotFound
	}
	rows, err := w.Pool.Query(ctx, `SELECT `+webhookColumns+` FROM webhooks
		WHERE account_id = $1 AND deleted_at IS NULL ORDER BY created_at, id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("alerts: list webhooks: %w", err)
	}
	out := []ledger.Webhook{}
	for rows.Next() {
		h, err := scanWebhook(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// Delete unsubscribes a webhook: nothing more is delivered to it, what is pending is
// dropped. Its deliveries stay readable.
func (w *Webhooks) DeleteWebhook(ctx context.Context, id string) error {
	if uuid.Validate(id) != nil {
		return ledger.ErrNotFound
	}
	err := tables.Audited(ctx, w.Pool, func(tx pgx.Tx) (before, after any, err error) {
		h, err := scanWebhook(tx.QueryRow(ctx, `
		WITH d AS (UPDATE webhooks SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL
			RETURNING `+webhookColumns+`),
		u AS (UPDATE webhook_deliveries SET next_attempt_at = NULL, last_error = 'webhook deleted'
			WHERE webhook_id IN (SELECT id FROM d) AND next_attempt_at IS NOT NULL)
		SELECT `+webhookColumns+` FROM d`, id, w.now()))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, ledger.ErrNotFound
		}
		return h, nil, err
	})
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("alerts: delete webhook: %w", err)
	}
	return nil
}

// Test queues a webhook.test event for the webhook alone and returns its id.
func (w *Webhooks) TestWebhook(ctx context.Context, id string) (string, error) {
	h, err := w.get(ctx, id)
	if err != nil {
		return "", err
	}
	at := w.now().UTC().Truncate(time.Microsecond)
	eventID := "evt_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	err = tables.Audited(ctx, w.Pool, func(tx pgx.Tx) (before, after any, err error) {
		_, err = tx.Exec(ctx, `
		WITH e AS (INSERT INTO webhook_events (id, account_id, type, body, created_at) VALUES ($1, $2, $3, $4, $5))
		INSERT INTO webhook_deliveries (webhook_id, event_id, next_attempt_at, created_at) VALUES ($6, $1, $5, $5)`,
			eventID, h.AccountID, TypeTest, string(TestBody(eventID, h.AccountID, h.ID, at)), at, h.ID)
		return nil, nil, err
	})
	if err != nil {
		return "", fmt.Errorf("alerts: test webhook: %w", err)
	}
	return eventID, nil
}

// Deliveries returns a webhook's deliveries, newest first, at most limit. A deleted
// webhook's stay readable.
func (w *Webhooks) WebhookDeliveries(ctx context.Context, id string, limit int) ([]ledger.WebhookDelivery, error) {
	if uuid.Validate(id) != nil {
		return nil, ledger.ErrNotFound
	}
	var exists bool
	if err := w.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhooks WHERE id = $1)`, id).Scan(&exists); err != nil {
		return nil, fmt.Errorf("alerts: deliveries: %w", err)
	}
	if !exists {
		return nil, ledger.ErrNotFound
	}
	rows, err := w.Pool.Query(ctx, `
		SELECT d.event_id, e.type, d.attempts, d.last_status, d.delivered_at, d.next_attempt_at
		FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
		WHERE d.webhook_id = $1 ORDER BY d.created_at DESC, d.event_id DESC LIMIT $2`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("alerts: deliveries: %w", err)
	}
	out := []ledger.WebhookDelivery{}
	for rows.Next() {
		var d ledger.WebhookDelivery
		var status *int32
		if err := rows.Scan(&d.EventID, &d.Type, &d.Attempts, &status, &d.DeliveredAt, &d.NextAttemptAt); err != nil {
			rows.Close()
			return nil, err
		}
		if status != nil {
			s := int(*status)
			d.LastStatus = &s
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Reseal seals again with the first key every secret sealed with another: the step of
// a key rotation that lets the old key go. It returns how many it moved.
func (w *Webhooks) Reseal(ctx context.Context) (int, error) {
	if w.Keys == nil {
		return 0, nil
	}
	rows, err := w.Pool.Query(ctx, `SELECT id, secret FROM webhooks`)
	if err != nil {
		return 0, fmt.Errorf("alerts: reseal: %w", err)
	}
	type row struct {
		id     uuid.UUID
		sealed []byte
	}
	var old []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.sealed); err != nil {
			rows.Close()
			return 0, err
		}
		if !w.Keys.current(r.sealed) {
			old = append(old, r)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, r := range old {
		secret, err := w.Keys.Open(r.sealed)
		if err != nil {
			return n, fmt.Errorf("alerts: reseal webhook %s: %w", r.id, err)
		}
		sealed, err := w.Keys.Seal(secret)
		if err != nil {
			return n, err
		}
		if _, err := w.Pool.Exec(ctx, `UPDATE webhooks SET secret = $2 WHERE id = $1 AND secret = $3`, r.id, sealed, r.sealed); err != nil {
			return n, fmt.Errorf("alerts: reseal: %w", err)
		}
		n++
	}
	return n, nil
}
