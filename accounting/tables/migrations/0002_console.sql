-- 0002_console: what the console's reports read.
--
-- usage_daily is a rollup of the charges in ledger_entries per account, UTC day, key
-- and model, so that a usage report reads one row per (day, key, model) shown instead
-- of every ledger entry. It is kept by a trigger on ledger_entries: the row is updated
-- in the same transaction as the charge's entry (ledger_commit's), so the rollup and the
-- ledger never disagree, and a charge that rolls back leaves no trace in either. The
-- day is the UTC day of the entry's created_at (the charge's time, as in the ledger).
--
-- Lock order: the trigger runs inside ledger_commit after the account row's lock is
-- taken, and locks only the usage_daily row of that account; so it adds no cycle.

CREATE TABLE usage_daily (
    account_id    uuid NOT NULL REFERENCES accounts (id),
    day           date NOT NULL,
    key_id        uuid NOT NULL,
    model         text NOT NULL,
    requests      bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
    input_tokens  bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    -- Micro-credits charged: minus the sum of the charge entries' amounts.
    charged       bigint NOT NULL DEFAULT 0 CHECK (charged >= 0),
    PRIMARY KEY (account_id, day, key_id, model)
);

CREATE FUNCTION ledger_usage_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_daily AS u (account_id, day, key_id, model, requests, input_tokens, output_tokens, charged)
    VALUES (NEW.account_id, (NEW.created_at AT TIME ZONE 'UTC')::date, NEW.key_id, coalesce(NEW.model, ''),
            1, coalesce(NEW.input_tokens, 0), coalesce(NEW.output_tokens, 0), -NEW.amount)
    ON CONFLICT (account_id, day, key_id, model) DO UPDATE SET
        requests = u.requests + 1,
        input_tokens = u.input_tokens + EXCLUDED.input_tokens,
        output_tokens = u.output_tokens + EXCLUDED.output_tokens,
        charged = u.charged + EXCLUDED.charged;
    RETURN NULL;
END
$$;

CREATE TRIGGER ledger_entries_usage_rollup AFTER INSERT ON ledger_entries
    FOR EACH ROW WHEN (NEW.kind = 'charge') EXECUTE FUNCTION ledger_usage_rollup();

-- Backfill from the charges already in the ledger.
INSERT INTO usage_daily (account_id, day, key_id, model, requests, input_tokens, output_tokens, charged)
SELECT account_id, (created_at AT TIME ZONE 'UTC')::date, key_id, coalesce(model, ''),
       count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), -sum(amount)
  FROM ledger_entries
 WHERE kind = 'charge'
 GROUP BY 1, 2, 3, 4;

-- An account's statement, newest first, page by page.
CREATE INDEX ledger_entries_account_newest ON ledger_entries (account_id, id DESC);

-- Listing an account's keys in creation order.
CREATE INDEX api_keys_account_created ON api_keys (account_id, created_at, id);
DROP INDEX api_keys_account_id;

-- The high-cost pool is a part of the general one.
ALTER TABLE tiers ADD CONSTRAINT tiers_high_cost_within_general CHECK (in_flight_high_cost <= in_flight_general);
