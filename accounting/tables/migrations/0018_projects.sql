-- 0018_projects: projects inside an account (issue 48), as data derived from the
-- journal's ProjectCreated, ProjectChanged, ProjectDeleted and KeyPlaced events.
--
-- The ledger's owner decides projects in memory (limits, spend, rates); these tables
-- are what the reports read: the projects of an account (kept after deletion, marked,
-- so a charge's project stays known), the project and own rates of each key, and the
-- project of each charge — the one its key was in when the request was admitted, which
-- is where the ledger held and charged it (a key may move later). usage_daily gains
-- the charge's project in its key so that usage is filtered and grouped by project
-- from the rollup, one row per (day, key, model, channel, upstream model, project).
--
-- A charge pays 16 bytes more in ledger_entries and, for a key in a project, one more
-- rollup column; keys outside any project write '' as before.

CREATE TABLE projects (
    id            uuid PRIMARY KEY,
    account_id    uuid NOT NULL REFERENCES accounts (id),
    parent_id     uuid REFERENCES projects (id),
    name          text NOT NULL,
    daily_limit   bigint CHECK (daily_limit >= 0),
    monthly_limit bigint CHECK (monthly_limit >= 0),
    -- The lifetime spend limit.
    total_limit   bigint CHECK (total_limit >= 0),
    rpm           bigint CHECK (rpm > 0),
    tpm           bigint CHECK (tpm > 0),
    -- NULL: every model.
    models        text[],
    created_at    timestamptz NOT NULL,
    -- When it was deleted; NULL while it exists.
    deleted_at    timestamptz
);

CREATE INDEX projects_by_account ON projects (account_id);
CREATE INDEX projects_by_parent ON projects (parent_id) WHERE parent_id IS NOT NULL;

ALTER TABLE api_keys
    ADD COLUMN project_id uuid REFERENCES projects (id),
    ADD COLUMN rpm bigint CHECK (rpm > 0),
    ADD COLUMN tpm bigint CHECK (tpm > 0);

-- Charges only; NULL for a key in no project and for every entry before projects.
ALTER TABLE ledger_entries ADD COLUMN project_id uuid;

ALTER TABLE usage_daily
    ADD COLUMN project_id text NOT NULL DEFAULT '',
    DROP CONSTRAINT usage_daily_pkey,
    ADD PRIMARY KEY (account_id, day, key_id, model, channel, upstream_model, project_id);

CREATE OR REPLACE FUNCTION ledger_usage_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_daily AS u (account_id, day, key_id, model, channel, upstream_model, project_id,
                                  requests, input_tokens, output_tokens, cache_read_tokens,
                                  cache_write_tokens, charged)
    SELECT account_id, (created_at AT TIME ZONE 'UTC')::date, key_id, coalesce(model, ''),
           coalesce(channel, ''), coalesce(upstream_model, ''), coalesce(project_id::text, ''),
           count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),
           sum(ledger_component_units(components, '{cache_read}')),
           sum(ledger_component_units(components, '{cache_write,cache_write_1h}')),
           -sum(amount)
      FROM new_entries
     WHERE kind = 'charge'
     GROUP BY 1, 2, 3, 4, 5, 6, 7
     ORDER BY 1, 2, 3, 4, 5, 6, 7
    ON CONFLICT (account_id, day, key_id, model, channel, upstream_model, project_id) DO UPDATE SET
        requests = u.requests + EXCLUDED.requests,
        input_tokens = u.input_tokens + EXCLUDED.input_tokens,
        output_tokens = u.output_tokens + EXCLUDED.output_tokens,
        cache_read_tokens = u.cache_read_tokens + EXCLUDED.cache_read_tokens,
        cache_write_tokens = u.cache_write_tokens + EXCLUDED.cache_write_tokens,
        charged = u.charged + EXCLUDED.charged;
    RETURN NULL;
END
$$;
