-- 0019_alerts: signed webhooks from the ledger (issue 49).
--
-- accounts.low_balance is the account's balance.low threshold, derived from the
-- journal (LowBalanceSet) like the rest of the row. webhooks are subscriptions, written
-- by the admin API (not ledger decisions); their secrets are sealed with AES-GCM by the
-- accounting process (docs/operations.md: the webhook key and its rotation).
--
-- webhook_events holds each alert's body as delivered, and webhook_deliveries is the
-- outbox: one row per event and subscribed webhook. The materializer inserts both in
-- the transaction that moves ledger_materialized past the alert's event, so each alert
-- is queued exactly once whatever restarts; the owner's delivery worker works off the
-- rows whose next_attempt_at is due (NULL: delivered or given up).

ALTER TABLE accounts ADD COLUMN IF NOT EXISTS low_balance bigint;

CREATE TABLE webhooks (
    id            uuid PRIMARY KEY,
    account_id    uuid NOT NULL, -- checked against the ledger's owner, which may be ahead of accounts
    url           text NOT NULL,
    -- The event types it receives; empty: all.
    events        text[] NOT NULL DEFAULT '{}',
    -- AES-GCM: key id (4 bytes) || nonce (12 bytes) || sealed whsec_ secret.
    secret        bytea NOT NULL,
    allow_private boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz
);

CREATE INDEX webhooks_account ON webhooks (account_id, created_at) WHERE deleted_at IS NULL;

CREATE TABLE webhook_events (
    id         text PRIMARY KEY,
    -- Insertion order, for the owner's count of events generated (metrics).
    n          bigserial NOT NULL,
    account_id uuid NOT NULL,
    type       text NOT NULL,
    -- The JSON body, byte for byte as signed and sent.
    body       text NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE INDEX webhook_events_n ON webhook_events (n);

CREATE TABLE webhook_deliveries (
    webhook_id      uuid NOT NULL REFERENCES webhooks (id),
    event_id        text NOT NULL REFERENCES webhook_events (id),
    attempts        integer NOT NULL DEFAULT 0,
    -- The HTTP status of the last attempt; 0: no answer (refused, timed out); NULL: none yet.
    last_status     integer,
    last_error      text NOT NULL DEFAULT '',
    first_attempt_at timestamptz,
    next_attempt_at timestamptz,
    delivered_at    timestamptz,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (webhook_id, event_id)
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE next_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_newest ON webhook_deliveries (webhook_id, created_at DESC);
