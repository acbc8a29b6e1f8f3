-- 0021_audit: every change made through accounting's admin API, who made it and how
-- (issue 50). A plain table written by the admin API right after the change is
-- decided, never by the journal engine: the audit is admin data, not money. account_id
-- is the account the change concerns (NULL for tiers and unscoped members), so that an
-- account's log includes its projects, keys and members. before and after are the
-- records as the admin API shows them, never a secret.

CREATE TABLE IF NOT EXISTS audit_log (
    id         bigserial PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    actor      text NOT NULL,
    via        text NOT NULL CHECK (via IN ('console', 'gatewayctl', 'api')),
    action     text NOT NULL,
    target     text NOT NULL,
    account_id uuid,
    before     jsonb,
    after      jsonb
);

CREATE INDEX IF NOT EXISTS audit_by_account ON audit_log (account_id, id);
CREATE INDEX IF NOT EXISTS audit_by_actor ON audit_log (actor, id);
