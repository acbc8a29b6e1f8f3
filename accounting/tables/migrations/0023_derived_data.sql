-- 0023_derived_data: the derived tables keep only what the reports read (issue 47).
--
-- The journal engine's owner decides every hold in memory and journals it; a hold is
-- not a row any more. What the reports read: a charge's statement row
-- (ledger_entries, one per charge, also what reconciliation sums), the daily usage
-- rollup (usage_daily), the accounts' balances and the keys' spend windows. So:
--
--   * The materializer no longer writes a reservations row per request (an insert and
--     an update). The reservations table and its archive keep the rows written before;
--     accounting's sweeper still moves the settled ones to the archive, and an import
--     of a ledger the store engine kept still reads its holds there.
--   * The materializer adds a call's charges to usage_daily itself, aggregated per row
--     in Go, instead of the statement trigger on ledger_entries that summed each new
--     entry's components in SQL. The trigger stays for a process of an earlier version
--     still materializing during a rolling upgrade: it skips a transaction that set
--     ledger.usage_written (the materializer's), and rolls up any other.
--   * A charge's reservation is unique by construction (the owner commits a hold once;
--     the materializer writes each journal record once, its seq moving in the same
--     transaction): the unique index on ledger_entries.reservation_id, which nothing
--     reads by, goes. So do the foreign keys from the derived rows to accounts, checked
--     with a row lock per charge: the materializer writes an account before its entries
--     in the same transaction.
--
-- Dropping an index or a constraint takes an ACCESS EXCLUSIVE lock on the table for a
-- moment (no scan); the function is replaced in place.

CREATE OR REPLACE FUNCTION ledger_usage_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('ledger.usage_written', true) = 'on' THEN
        RETURN NULL;
    END IF;
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

ALTER TABLE ledger_entries
    DROP CONSTRAINT IF EXISTS ledger_entries_one_charge_per_reservation,
    DROP CONSTRAINT IF EXISTS ledger_entries_account_id_fkey;

ALTER TABLE usage_daily DROP CONSTRAINT IF EXISTS usage_daily_account_id_fkey;
