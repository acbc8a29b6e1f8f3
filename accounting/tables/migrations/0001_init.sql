-- 0001_init: the ledger's schema and the functions that make each hot-path decision
-- (reserve, commit, release, expire) one round trip and one transaction.
--
-- Concurrency rules every function below keeps:
--   * Everything that limits an account (balance, reserved, in-flight pools, the
--     requests-per-minute window, and the key spend windows of its keys) is guarded by
--     the account row's lock: nothing reads-then-writes them without holding it.
--   * Lock order is reservation row -> account row -> key_spend rows. Reserve holds no
--     existing reservation's lock; ExpireDue takes its reservations with SKIP LOCKED and
--     then locks the accounts in id order. So no cycle, no deadlock.
--   * Transactions run at READ COMMITTED: a statement that waited for a row lock
--     re-reads the newest version of that row, so a decision is never made on a stale
--     balance, pool count or reservation state.
--   * `p_now` is the caller's clock when given (tests), else the database's now().

CREATE TABLE tiers (
    name                text PRIMARY KEY,
    rpm_before_topup    integer NOT NULL CHECK (rpm_before_topup >= 0),
    rpm_after_topup     integer NOT NULL CHECK (rpm_after_topup >= 0),
    in_flight_general   integer NOT NULL CHECK (in_flight_general >= 0),
    in_flight_high_cost integer NOT NULL CHECK (in_flight_high_cost >= 0)
);

INSERT INTO tiers (name, rpm_before_topup, rpm_after_topup, in_flight_general, in_flight_high_cost) VALUES
    ('default', 20, 600, 16, 2),
    ('tight', 3, 3, 2, 1),
    ('enterprise', 600, 6000, 64, 8);

CREATE TABLE accounts (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tier                text NOT NULL REFERENCES tiers (name),
    -- balance = sum(ledger_entries.amount) of the account, kept in the same transaction
    -- as every entry.
    balance             bigint NOT NULL DEFAULT 0,
    -- reserved = sum(amount) of the account's reservations in state 'held'.
    reserved            bigint NOT NULL DEFAULT 0,
    suspended           boolean NOT NULL DEFAULT false,
    topped_up           boolean NOT NULL DEFAULT false,
    -- in_flight = held reservations (general pool); in_flight_high_cost = those of them
    -- in the high-cost pool.
    in_flight           integer NOT NULL DEFAULT 0,
    in_flight_high_cost integer NOT NULL DEFAULT 0,
    -- The requests-per-minute window: admitted reservations in the UTC minute rpm_minute.
    rpm_minute          timestamptz NOT NULL DEFAULT '-infinity',
    rpm_count           integer NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT accounts_reserved_nonnegative CHECK (reserved >= 0),
    -- A charge never exceeds its hold, so this holds for ever: an account is never overspent.
    CONSTRAINT accounts_never_overspent CHECK (balance >= reserved),
    CONSTRAINT accounts_pools_nonnegative CHECK (in_flight_high_cost >= 0 AND in_flight >= in_flight_high_cost)
);

CREATE TABLE api_keys (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id     uuid NOT NULL REFERENCES accounts (id),
    -- SHA-256 of the secret; the secret itself is never stored.
    hash           bytea NOT NULL CONSTRAINT api_keys_hash_unique UNIQUE CHECK (octet_length(hash) = 32),
    prefix         text NOT NULL DEFAULT '',
    name           text NOT NULL DEFAULT '',
    -- Empty means every model.
    allowed_models text[] NOT NULL DEFAULT '{}',
    daily_limit    bigint CHECK (daily_limit >= 0),
    monthly_limit  bigint CHECK (monthly_limit >= 0),
    expires_at     timestamptz,
    admin_created  boolean NOT NULL DEFAULT false,
    disabled       boolean NOT NULL DEFAULT false,
    revoked_at     timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX api_keys_account_id ON api_keys (account_id);

CREATE TABLE reservations (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The gateway's idempotency key: a retried Reserve finds its first reservation.
    request_id     text NOT NULL CONSTRAINT reservations_request_id_unique UNIQUE,
    account_id     uuid NOT NULL REFERENCES accounts (id),
    key_id         uuid NOT NULL REFERENCES api_keys (id),
    model          text NOT NULL,
    amount         bigint NOT NULL CHECK (amount >= 0),
    -- 1 general, 2 high-cost (which also holds a general slot).
    pool           smallint NOT NULL CHECK (pool IN (1, 2)),
    state          text NOT NULL DEFAULT 'held' CHECK (state IN ('held', 'committed', 'released', 'expired')),
    -- actual is what the caller reported at commit; charged = least(actual, amount).
    actual         bigint,
    charged        bigint NOT NULL DEFAULT 0 CHECK (charged >= 0 AND charged <= amount),
    created_at     timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    settled_at     timestamptz,
    release_reason text,
    CONSTRAINT reservations_settled CHECK ((state = 'held') = (settled_at IS NULL)),
    CONSTRAINT reservations_charged_only_committed CHECK (state = 'committed' OR charged = 0)
);

-- The sweeper's queue: only held reservations, by expiry.
CREATE INDEX reservations_held_expiry ON reservations (expires_at) WHERE state = 'held';

-- Append-only: top-ups are positive, charges zero or negative.
CREATE TABLE ledger_entries (
    id              bigint GENERATED ALWAYS AS IDENTITY,
    account_id      uuid NOT NULL REFERENCES accounts (id),
    kind            text NOT NULL CHECK (kind IN ('top_up', 'charge')),
    amount          bigint NOT NULL,
    -- A reservation is charged at most once.
    reservation_id  uuid CONSTRAINT ledger_entries_one_charge_per_reservation UNIQUE REFERENCES reservations (id),
    -- A top-up's idempotency key, unique per account (NULL: not idempotent).
    idempotency_key text,
    key_id          uuid,
    model           text,
    upstream_model  text,
    channel         text,
    input_tokens    bigint,
    output_tokens   bigint,
    units           jsonb,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (id),
    -- Also the index for an account's entries (account_id leads).
    CONSTRAINT ledger_entries_idempotency UNIQUE (account_id, idempotency_key),
    CONSTRAINT ledger_entries_kind CHECK (
        (kind = 'top_up' AND amount > 0 AND reservation_id IS NULL)
        OR (kind = 'charge' AND amount <= 0 AND reservation_id IS NOT NULL))
);

CREATE FUNCTION ledger_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger_entries is append-only' USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER ledger_entries_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON ledger_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_append_only();

-- A key's spend per UTC day (period 'd', period_start = the day) and per UTC month
-- (period 'm', period_start = the month's first day). committed = charges of
-- reservations created in the window; held = amounts of those still held.
CREATE TABLE key_spend (
    key_id       uuid NOT NULL REFERENCES api_keys (id),
    period       text NOT NULL CHECK (period IN ('d', 'm')),
    period_start date NOT NULL,
    committed    bigint NOT NULL DEFAULT 0 CHECK (committed >= 0),
    held         bigint NOT NULL DEFAULT 0 CHECK (held >= 0),
    PRIMARY KEY (key_id, period, period_start)
);

CREATE TABLE video_tasks (
    task_id           text PRIMARY KEY,
    account_id        uuid NOT NULL REFERENCES accounts (id),
    key_id            uuid NOT NULL REFERENCES api_keys (id),
    admin_created_key boolean NOT NULL,
    model             text NOT NULL,
    created_at        timestamptz NOT NULL
);

-- Change notifications: caches listen on 'ledger_changes'. NOTIFY is transactional, so
-- a change is announced exactly when it becomes visible.
CREATE FUNCTION ledger_notify_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ledger_changes', 'k:' || NEW.id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER api_keys_notify AFTER UPDATE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION ledger_notify_key();

CREATE FUNCTION ledger_notify_account() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ledger_changes', 'a:' || NEW.id::text);
    RETURN NULL;
END
$$;

-- Only the columns caches hold: the hot path's updates (reserved, pools, rpm, balance
-- on commit) do not fire it. Every top-up sets topped_up, so every top-up notifies.
CREATE TRIGGER accounts_notify AFTER UPDATE OF suspended, topped_up, tier ON accounts
    FOR EACH ROW EXECUTE FUNCTION ledger_notify_account();

-- ledger_reserve admits a request or says why not. Outcomes: 'admitted', 'replayed'
-- (the request id already has a reservation, returned as is), or a refusal:
-- invalid_api_key, account_suspended, insufficient_credits, key_limit_reached,
-- concurrency_limit_exceeded, rate_limit_exceeded, already_exists (the request id
-- belongs to another key). A refusal changes nothing.
CREATE FUNCTION ledger_reserve(
    p_request_id text, p_key_id uuid, p_model text, p_amount bigint, p_pool smallint,
    p_ttl interval, p_now timestamptz,
    OUT o_outcome text, OUT o_limit text, OUT o_retry_after integer,
    OUT o_id uuid, OUT o_account_id uuid, OUT o_key_id uuid, OUT o_model text,
    OUT o_amount bigint, OUT o_pool smallint, OUT o_state text, OUT o_charged bigint,
    OUT o_created_at timestamptz, OUT o_expires_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_now    timestamptz := coalesce(p_now, now());
    v        record;
    v_minute timestamptz;
    v_count  integer;
    v_rpm    integer;
    v_day    date;
    v_month  date;
    v_used   bigint;
BEGIN
    SELECT k.account_id, k.disabled, k.revoked_at, k.expires_at AS key_expires_at,
           k.daily_limit, k.monthly_limit,
           a.suspended, a.topped_up, a.balance, a.reserved, a.in_flight, a.in_flight_high_cost,
           a.rpm_minute, a.rpm_count,
           t.rpm_before_topup, t.rpm_after_topup,
           t.in_flight_general AS pool_general, t.in_flight_high_cost AS pool_high_cost
      INTO v
      FROM api_keys k
      JOIN accounts a ON a.id = k.account_id
      JOIN tiers t ON t.name = a.tier
     WHERE k.id = p_key_id
       FOR UPDATE OF a;
    IF NOT FOUND THEN
        o_outcome := 'invalid_api_key';
        RETURN;
    END IF;

    -- Under the account lock, so two attempts with one request id are serialized and the
    -- second sees the first.
    SELECT r.id, r.account_id, r.key_id, r.model, r.amount, r.pool, r.state, r.charged,
           r.created_at, r.expires_at
      INTO o_id, o_account_id, o_key_id, o_model, o_amount, o_pool, o_state, o_charged,
           o_created_at, o_expires_at
      FROM reservations r
     WHERE r.request_id = p_request_id;
    IF FOUND THEN
        IF o_key_id <> p_key_id THEN
            o_id := NULL; o_account_id := NULL; o_key_id := NULL; o_model := NULL;
            o_amount := NULL; o_pool := NULL; o_state := NULL; o_charged := NULL;
            o_created_at := NULL; o_expires_at := NULL;
            o_outcome := 'already_exists';
            RETURN;
        END IF;
        o_outcome := 'replayed';
        RETURN;
    END IF;

    IF v.disabled OR v.revoked_at IS NOT NULL
       OR (v.key_expires_at IS NOT NULL AND v.key_expires_at <= v_now) THEN
        o_outcome := 'invalid_api_key';
        RETURN;
    END IF;
    IF v.suspended THEN
        o_outcome := 'account_suspended';
        RETURN;
    END IF;
    IF v.balance - v.reserved < p_amount THEN
        o_outcome := 'insufficient_credits';
        RETURN;
    END IF;

    -- Spend windows. A free request adds nothing to them, so it is never refused by them.
    -- The monthly window is checked first: when both are full, waiting for the day to end
    -- would not help.
    IF p_amount > 0 THEN
        v_day := (v_now AT TIME ZONE 'UTC')::date;
        v_month := date_trunc('month', v_day)::date;
        IF v.monthly_limit IS NOT NULL THEN
            SELECT coalesce(sum(s.committed + s.held), 0) INTO v_used
              FROM key_spend s
             WHERE s.key_id = p_key_id AND s.period = 'm' AND s.period_start = v_month;
            IF v_used + p_amount > v.monthly_limit THEN
                o_outcome := 'key_limit_reached';
                o_limit := 'monthly';
                o_retry_after := greatest(1, ceil(extract(epoch FROM
                    ((v_month + interval '1 month')::timestamp AT TIME ZONE 'UTC') - v_now))::integer);
                RETURN;
            END IF;
        END IF;
        IF v.daily_limit IS NOT NULL THEN
            SELECT coalesce(sum(s.committed + s.held), 0) INTO v_used
              FROM key_spend s
             WHERE s.key_id = p_key_id AND s.period = 'd' AND s.period_start = v_day;
            IF v_used + p_amount > v.daily_limit THEN
                o_outcome := 'key_limit_reached';
                o_limit := 'daily';
                o_retry_after := greatest(1, ceil(extract(epoch FROM
                    ((v_day + 1)::timestamp AT TIME ZONE 'UTC') - v_now))::integer);
                RETURN;
            END IF;
        END IF;
    END IF;

    IF v.in_flight >= v.pool_general THEN
        o_outcome := 'concurrency_limit_exceeded';
        o_limit := 'general';
        RETURN;
    END IF;
    IF p_pool = 2 AND v.in_flight_high_cost >= v.pool_high_cost THEN
        o_outcome := 'concurrency_limit_exceeded';
        o_limit := 'high_cost';
        RETURN;
    END IF;

    -- A window stamped later than our minute (another process's clock ahead of ours) is
    -- the current one.
    v_minute := date_trunc('minute', v_now, 'UTC');
    IF v.rpm_minute >= v_minute THEN
        v_count := v.rpm_count;
        v_minute := v.rpm_minute;
    ELSE
        v_count := 0;
    END IF;
    IF v.topped_up THEN
        v_rpm := v.rpm_after_topup;
    ELSE
        v_rpm := v.rpm_before_topup;
    END IF;
    IF v_count >= v_rpm THEN
        o_outcome := 'rate_limit_exceeded';
        o_limit := 'rpm';
        o_retry_after := greatest(1, ceil(extract(epoch FROM v_minute + interval '1 minute' - v_now))::integer);
        RETURN;
    END IF;

    INSERT INTO reservations AS r (request_id, account_id, key_id, model, amount, pool, created_at, expires_at)
    VALUES (p_request_id, v.account_id, p_key_id, p_model, p_amount, p_pool, v_now, v_now + p_ttl)
    ON CONFLICT ON CONSTRAINT reservations_request_id_unique DO NOTHING
    RETURNING r.id, r.account_id, r.key_id, r.model, r.amount, r.pool, r.state, r.charged,
              r.created_at, r.expires_at
         INTO o_id, o_account_id, o_key_id, o_model, o_amount, o_pool, o_state, o_charged,
              o_created_at, o_expires_at;
    IF NOT FOUND THEN
        -- Taken meanwhile by a reservation of another account.
        o_outcome := 'already_exists';
        RETURN;
    END IF;

    UPDATE accounts
       SET reserved = reserved + p_amount,
           in_flight = in_flight + 1,
           in_flight_high_cost = in_flight_high_cost + CASE WHEN p_pool = 2 THEN 1 ELSE 0 END,
           rpm_minute = v_minute,
           rpm_count = v_count + 1
     WHERE id = v.account_id;

    IF p_amount > 0 THEN
        INSERT INTO key_spend AS s (key_id, period, period_start, held)
        VALUES (p_key_id, 'd', v_day, p_amount), (p_key_id, 'm', v_month, p_amount)
        ON CONFLICT (key_id, period, period_start) DO UPDATE SET held = s.held + EXCLUDED.held;
    END IF;

    o_outcome := 'admitted';
END
$$;

-- ledger_settle_windows moves a settled reservation's amount out of its key's windows
-- (those of its creation time): held -= amount, committed += charged. The caller holds
-- the account lock. (PL/pgSQL rather than SQL: PostgreSQL before 18 re-plans a
-- non-inlined SQL function's body at every call.)
CREATE FUNCTION ledger_settle_windows(p_key_id uuid, p_created_at timestamptz, p_amount bigint, p_charged bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE key_spend
       SET held = held - p_amount, committed = committed + p_charged
     WHERE key_id = p_key_id
       AND ((period = 'd' AND period_start = (p_created_at AT TIME ZONE 'UTC')::date)
         OR (period = 'm' AND period_start = date_trunc('month', p_created_at AT TIME ZONE 'UTC')::date));
END
$$;

-- ledger_commit charges a held reservation once: least(actual, amount). Outcomes:
-- 'committed', 'replayed' (committed before: the first result), 'settled' (released or
-- expired: nothing charged), 'not_found'.
CREATE FUNCTION ledger_commit(
    p_id uuid, p_actual bigint, p_input_tokens bigint, p_output_tokens bigint, p_units jsonb,
    p_upstream_model text, p_channel text, p_now timestamptz,
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
                                upstream_model, channel, input_tokens, output_tokens, units, created_at)
    VALUES (r.account_id, 'charge', -r.charged, p_id, r.key_id, r.model,
            nullif(p_upstream_model, ''), nullif(p_channel, ''), p_input_tokens, p_output_tokens,
            p_units, v_now);

    IF r.amount > 0 THEN
        PERFORM ledger_settle_windows(r.key_id, r.created_at, r.amount, r.charged);
    END IF;

    o_outcome := 'committed';
    o_charged := r.charged;
    o_capped := p_actual > r.amount;
    o_state := 'committed';
END
$$;

-- ledger_release frees a held reservation without a charge. Returns the reservation's
-- state afterwards (released, or what it already was) and its charge; NULL state when
-- the reservation does not exist.
CREATE FUNCTION ledger_release(p_id uuid, p_reason text, p_now timestamptz,
    OUT o_state text, OUT o_charged bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r     record;
BEGIN
    UPDATE reservations
       SET state = 'released', settled_at = v_now, release_reason = nullif(p_reason, '')
     WHERE id = p_id AND state = 'held'
    RETURNING account_id, key_id, amount, pool, created_at INTO r;
    IF NOT FOUND THEN
        SELECT x.state, x.charged INTO o_state, o_charged FROM reservations x WHERE x.id = p_id;
        RETURN;
    END IF;

    UPDATE accounts
       SET reserved = reserved - r.amount,
           in_flight = in_flight - 1,
           in_flight_high_cost = in_flight_high_cost - CASE WHEN r.pool = 2 THEN 1 ELSE 0 END
     WHERE id = r.account_id;

    IF r.amount > 0 THEN
        PERFORM ledger_settle_windows(r.key_id, r.created_at, r.amount, 0);
    END IF;

    o_state := 'released';
    o_charged := 0;
END
$$;

-- ledger_expire_due moves up to p_limit held reservations past their expiry to
-- 'expired' and frees what they held. Reservations being settled by someone else are
-- skipped (SKIP LOCKED), so any number of sweepers can run at once; accounts are locked
-- in id order, so two sweepers never deadlock.
CREATE FUNCTION ledger_expire_due(p_limit integer, p_now timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    v_ids uuid[];
    r     record;
BEGIN
    SELECT array_agg(d.id) INTO v_ids
      FROM (SELECT x.id FROM reservations x
             WHERE x.state = 'held' AND x.expires_at <= v_now
             ORDER BY x.expires_at
             LIMIT p_limit
               FOR UPDATE SKIP LOCKED) d;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;

    PERFORM 1 FROM accounts a
     WHERE a.id IN (SELECT x.account_id FROM reservations x WHERE x.id = ANY (v_ids))
     ORDER BY a.id
       FOR UPDATE;

    UPDATE reservations
       SET state = 'expired', settled_at = v_now, release_reason = 'expired'
     WHERE id = ANY (v_ids);

    UPDATE accounts a
       SET reserved = a.reserved - s.amount,
           in_flight = a.in_flight - s.n,
           in_flight_high_cost = a.in_flight_high_cost - s.n_high_cost
      FROM (SELECT x.account_id, sum(x.amount) AS amount, count(*) AS n,
                   count(*) FILTER (WHERE x.pool = 2) AS n_high_cost
              FROM reservations x WHERE x.id = ANY (v_ids)
             GROUP BY x.account_id) s
     WHERE a.id = s.account_id;

    FOR r IN SELECT x.key_id, x.created_at, x.amount FROM reservations x
              WHERE x.id = ANY (v_ids) AND x.amount > 0 LOOP
        PERFORM ledger_settle_windows(r.key_id, r.created_at, r.amount, 0);
    END LOOP;

    RETURN cardinality(v_ids);
END
$$;

-- ledger_top_up appends a top-up entry and raises the balance in one transaction;
-- a repeated idempotency key adds nothing. Returns the account (no row: unknown).
CREATE FUNCTION ledger_top_up(p_account_id uuid, p_amount bigint, p_idempotency_key text, p_now timestamptz)
RETURNS SETOF accounts LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM accounts WHERE id = p_account_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key, created_at)
    VALUES (p_account_id, 'top_up', p_amount, nullif(p_idempotency_key, ''), coalesce(p_now, now()))
    ON CONFLICT ON CONSTRAINT ledger_entries_idempotency DO NOTHING;
    IF FOUND THEN
        UPDATE accounts SET balance = balance + p_amount, topped_up = true WHERE id = p_account_id;
    END IF;
    RETURN QUERY SELECT * FROM accounts WHERE id = p_account_id;
END
$$;
