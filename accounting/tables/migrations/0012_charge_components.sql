-- 0012_charge_components: each charge keeps its priced breakdown and its tier, and the
-- usage rollup counts cache tokens and splits by channel and upstream model.
--
-- ledger_entries gains `components` (jsonb: an array of {"name", "units",
-- "price_per_mtok", "amount"}, the rate card's parts with units > 0, amounts in
-- micro-credits as priced) and `service_tier` (the tier the charge was priced at). Both
-- are NULL for top-ups and for charges recorded without a breakdown (every charge before
-- this migration): those rows stay valid as they are. A charge the hold capped keeps its
-- components as priced, so they sum to more than -amount: the difference is what the
-- cap forgave (gatewayctl ledger shows "capped").
--
-- usage_daily gains `channel` and `upstream_model` in its key (one rollup row per
-- account, UTC day, key, model, channel and upstream model) and the sums
-- `cache_read_tokens` and `cache_write_tokens` (cache_write + cache_write_1h) of the
-- charges' components. Its rows are made again from the ledger, split by the channel and
-- upstream model every charge recorded since 0001 (cache tokens 0: no charge before this
-- migration has components), as 0002 first made them: the same totals per account, day,
-- key and model as before, so every report of an existing day reads the same.
--
-- ledger_commit gains the two arguments; the old signature stays as a call of the new
-- one without a breakdown, so a process still running the previous version keeps
-- charging while this one rolls out.
--
-- Locks: new columns without a default, or with a constant one, are a catalog update.
-- Making usage_daily again reads every charge of the ledger under the locks below, so
-- charges wait for it: about as long as a sequential scan of ledger_entries (an operator
-- with a large ledger runs this migration at a quiet hour). Both tables are locked first, in the order a
-- charge takes them (ledger_entries, then usage_daily through its trigger), each try
-- waiting at most 100 ms so that charges queued behind it wait no longer.

DO $$
BEGIN
    LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '100ms', true);
            LOCK TABLE ledger_entries, usage_daily IN ACCESS EXCLUSIVE MODE;
            PERFORM set_config('lock_timeout', '0', true);
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.05);
        END;
    END LOOP;
END
$$;

ALTER TABLE ledger_entries
    ADD COLUMN components jsonb,
    ADD COLUMN service_tier text,
    -- NOT VALID: checked for every new row, without a scan of the rows before it (all
    -- NULL in a column just added).
    ADD CONSTRAINT ledger_entries_components_array
        CHECK (components IS NULL OR jsonb_typeof(components) = 'array') NOT VALID;

ALTER TABLE usage_daily
    ADD COLUMN channel text NOT NULL DEFAULT '',
    ADD COLUMN upstream_model text NOT NULL DEFAULT '',
    ADD COLUMN cache_read_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    ADD COLUMN cache_write_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
    DROP CONSTRAINT usage_daily_pkey;

DELETE FROM usage_daily;

INSERT INTO usage_daily (account_id, day, key_id, model, channel, upstream_model, requests, input_tokens,
                         output_tokens, charged)
SELECT account_id, (created_at AT TIME ZONE 'UTC')::date, key_id, coalesce(model, ''), coalesce(channel, ''),
       coalesce(upstream_model, ''), count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),
       -sum(amount)
  FROM ledger_entries
 WHERE kind = 'charge'
 GROUP BY 1, 2, 3, 4, 5, 6;

ALTER TABLE usage_daily ADD PRIMARY KEY (account_id, day, key_id, model, channel, upstream_model);

-- ledger_component_units sums the units of the named components of a breakdown (0 for
-- none). IMMUTABLE: it reads nothing but its arguments.
CREATE FUNCTION ledger_component_units(p_components jsonb, p_names text[]) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(sum((c ->> 'units')::bigint), 0)
      FROM jsonb_array_elements(coalesce(p_components, '[]')) c
     WHERE c ->> 'name' = ANY (p_names)
$$;

CREATE OR REPLACE FUNCTION ledger_usage_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_daily AS u (account_id, day, key_id, model, channel, upstream_model, requests,
                                  input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, charged)
    SELECT account_id, (created_at AT TIME ZONE 'UTC')::date, key_id, coalesce(model, ''),
           coalesce(channel, ''), coalesce(upstream_model, ''),
           count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),
           sum(ledger_component_units(components, '{cache_read}')),
           sum(ledger_component_units(components, '{cache_write,cache_write_1h}')),
           -sum(amount)
      FROM new_entries
     WHERE kind = 'charge'
     GROUP BY 1, 2, 3, 4, 5, 6
     ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (account_id, day, key_id, model, channel, upstream_model) DO UPDATE SET
        requests = u.requests + EXCLUDED.requests,
        input_tokens = u.input_tokens + EXCLUDED.input_tokens,
        output_tokens = u.output_tokens + EXCLUDED.output_tokens,
        cache_read_tokens = u.cache_read_tokens + EXCLUDED.cache_read_tokens,
        cache_write_tokens = u.cache_write_tokens + EXCLUDED.cache_write_tokens,
        charged = u.charged + EXCLUDED.charged;
    RETURN NULL;
END
$$;

-- ledger_commit as in 0001, with the charge's components and tier.
CREATE FUNCTION ledger_commit(
    p_id uuid, p_actual bigint, p_input_tokens bigint, p_output_tokens bigint, p_units jsonb,
    p_upstream_model text, p_channel text, p_now timestamptz, p_components jsonb, p_service_tier text,
    OUT o_outcome text, OUT o_charged bigint, OUT o_capped boolean, OUT o_state text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r     record;
BEGIN
    UPDATE reservations
       SET state = 'committed', actual = p_actual, charged = least(p_actual, amount), settled_at = v_now
     WHERE id = p_id AND state = 'held'
    RETURNING account_id, key_id, model, amount, pool, charged, created_at INTO r;
    IF NOT FOUND THEN
        SELECT x.state, x.charged, coalesce(x.actual > x.amount, false)
          INTO o_state, o_charged, o_capped
          FROM reservations x WHERE x.id = p_id;
        IF NOT FOUND THEN
            o_outcome := 'not_found';
        ELSIF o_state = 'committed' THEN
            o_outcome := 'replayed';
        ELSE
            o_outcome := 'settled';
        END IF;
        RETURN;
    END IF;

    UPDATE accounts
       SET balance = balance - r.charged,
           reserved = reserved - r.amount,
           in_flight = in_flight - 1,
           in_flight_high_cost = in_flight_high_cost - CASE WHEN r.pool = 2 THEN 1 ELSE 0 END
     WHERE id = r.account_id;

    INSERT INTO ledger_entries (account_id, kind, amount, reservation_id, key_id, model,
                                upstream_model, channel, input_tokens, output_tokens, units,
                                components, service_tier, created_at)
    VALUES (r.account_id, 'charge', -r.charged, p_id, r.key_id, r.model,
            nullif(p_upstream_model, ''), nullif(p_channel, ''), p_input_tokens, p_output_tokens,
            p_units, p_components, nullif(p_service_tier, ''), v_now);

    IF r.amount > 0 THEN
        PERFORM ledger_settle_windows(r.key_id, r.created_at, r.amount, r.charged);
    END IF;

    o_outcome := 'committed';
    o_charged := r.charged;
    o_capped := p_actual > r.amount;
    o_state := 'committed';
END
$$;

CREATE OR REPLACE FUNCTION ledger_commit(
    p_id uuid, p_actual bigint, p_input_tokens bigint, p_output_tokens bigint, p_units jsonb,
    p_upstream_model text, p_channel text, p_now timestamptz,
    OUT o_outcome text, OUT o_charged bigint, OUT o_capped boolean, OUT o_state text)
LANGUAGE sql AS $$
    SELECT * FROM ledger_commit(p_id, p_actual, p_input_tokens, p_output_tokens, p_units,
                                p_upstream_model, p_channel, p_now, NULL::jsonb, NULL::text)
$$;
