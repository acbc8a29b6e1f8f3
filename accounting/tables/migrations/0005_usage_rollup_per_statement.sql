-- 0005_usage_rollup_per_statement: the usage rollup (0002_console) is kept once per
-- INSERT statement instead of once per row.
--
-- Group commit (accounting/store/group_write.go) inserts a whole batch's charges with one
-- statement. The row trigger ran the rollup's upsert once per charge, each a PL/pgSQL
-- call and a statement of its own; this one reads the statement's new rows (a transition
-- table), adds up the charges per (account, UTC day, key, model) and upserts each rollup
-- row once. A lone charge (ledger_commit) still makes one upsert. The totals are the
-- same: a rollup row gains the count, tokens and amount of every charge of its group.
--
-- Lock order: the charges of an account are inserted by a transaction that holds the
-- account's row lock (ledger_commit alone, or a batch that locked every account it
-- charges), so no other transaction touches these rollup rows meanwhile; within the
-- statement they are locked in key order.
--
-- Only a function and a trigger change: no data changes, no rewrite. DROP TRIGGER and
-- CREATE TRIGGER take a SHARE ROW EXCLUSIVE lock on ledger_entries for the migration's
-- transaction, a few milliseconds.

CREATE OR REPLACE FUNCTION ledger_usage_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_daily AS u (account_id, day, key_id, model, requests, input_tokens, output_tokens, charged)
    SELECT account_id, (created_at AT TIME ZONE 'UTC')::date, key_id, coalesce(model, ''),
           count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), -sum(amount)
      FROM new_entries
     WHERE kind = 'charge'
     GROUP BY 1, 2, 3, 4
     ORDER BY 1, 2, 3, 4
    ON CONFLICT (account_id, day, key_id, model) DO UPDATE SET
        requests = u.requests + EXCLUDED.requests,
        input_tokens = u.input_tokens + EXCLUDED.input_tokens,
        output_tokens = u.output_tokens + EXCLUDED.output_tokens,
        charged = u.charged + EXCLUDED.charged;
    RETURN NULL;
END
$$;

DROP TRIGGER ledger_entries_usage_rollup ON ledger_entries;

CREATE TRIGGER ledger_entries_usage_rollup AFTER INSERT ON ledger_entries
    REFERENCING NEW TABLE AS new_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_usage_rollup();
