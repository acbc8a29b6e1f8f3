-- 0004_batch: group commit. ledger_batch runs many reserve, commit and release
-- operations in one statement, so in one transaction and one WAL flush, each deciding
-- exactly as it would alone (it calls ledger_reserve, ledger_commit, ledger_release).
--
-- Lock order (0001's rule, for the whole batch): first every reservation row the batch
-- settles, in id order, then every account row the batch touches, in id order; key_spend
-- rows only under their account's lock. Both are taken with SKIP LOCKED, so the batch
-- never waits for a lock another transaction holds and never takes part in a deadlock:
-- an operation whose reservation or account row it did not get is answered 'deferred'
-- and changes nothing, and the caller runs it on its own (in its own transaction, as
-- before group commit). Every operation runs after all the batch's locks are held, so
-- it waits for no row lock.
--
-- Operations are decided in array order; an operation sees what the ones before it in
-- the batch did (a second reserve of one request id replays the first, a second commit
-- of one reservation replays it). A refusal changes nothing and does not affect the
-- others. An error (not an outcome) fails the whole statement, which then changed
-- nothing; the caller then runs each operation on its own.
--
-- p_kind: 1 reserve, 2 commit, 3 release. Per operation, only its kind's arguments are
-- read: reserve (p_request_id, p_key_id, p_model, p_amount, p_pool, p_ttl), commit
-- (p_res_id, p_actual, p_input_tokens, p_output_tokens, p_units, p_upstream_model,
-- p_channel), release (p_res_id, p_reason); p_now for every kind. One row per operation,
-- in order (o_idx from 1), with the outcome of its function's kind.
CREATE FUNCTION ledger_batch(
    p_kind smallint[], p_now timestamptz[],
    p_request_id text[], p_key_id uuid[], p_model text[], p_amount bigint[], p_pool smallint[],
    p_ttl interval[],
    p_res_id uuid[], p_actual bigint[], p_input_tokens bigint[], p_output_tokens bigint[],
    p_units text[], p_upstream_model text[], p_channel text[], p_reason text[])
RETURNS TABLE (o_idx integer, o_outcome text, o_limit text, o_retry_after integer,
    o_id uuid, o_account_id uuid, o_key_id uuid, o_model text, o_amount bigint, o_pool smallint,
    o_state text, o_charged bigint, o_capped boolean, o_created_at timestamptz, o_expires_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_res       uuid[];
    v_res_accts uuid[];
    v_accts     uuid[];
    v_acct      uuid;
    v_pos       integer;
    i           integer;
    rr          record;
    rc          record;
BEGIN
    SELECT coalesce(array_agg(x.id), '{}'), coalesce(array_agg(x.account_id), '{}')
      INTO v_res, v_res_accts
      FROM (SELECT r.id, r.account_id FROM reservations r
             WHERE r.id = ANY (p_res_id)
             ORDER BY r.id
               FOR UPDATE SKIP LOCKED) x;

    SELECT coalesce(array_agg(x.id), '{}') INTO v_accts
      FROM (SELECT a.id FROM accounts a
             WHERE a.id = ANY (v_res_accts)
                OR a.id IN (SELECT k.account_id FROM api_keys k WHERE k.id = ANY (p_key_id))
             ORDER BY a.id
               FOR UPDATE SKIP LOCKED) x;

    FOR i IN 1 .. coalesce(cardinality(p_kind), 0) LOOP
        o_idx := i;
        o_outcome := NULL; o_limit := NULL; o_retry_after := NULL; o_id := NULL;
        o_account_id := NULL; o_key_id := NULL; o_model := NULL; o_amount := NULL;
        o_pool := NULL; o_state := NULL; o_charged := NULL; o_capped := NULL;
        o_created_at := NULL; o_expires_at := NULL;
        IF p_kind[i] = 1 THEN
            SELECT k.account_id INTO v_acct FROM api_keys k WHERE k.id = p_key_id[i];
            IF FOUND AND NOT v_acct = ANY (v_accts) THEN
                o_outcome := 'deferred';
            ELSE
                SELECT * INTO rr FROM ledger_reserve(p_request_id[i], p_key_id[i], p_model[i],
                    p_amount[i], p_pool[i], p_ttl[i], p_now[i]);
                o_outcome := rr.o_outcome; o_limit := rr.o_limit; o_retry_after := rr.o_retry_after;
                o_id := rr.o_id; o_account_id := rr.o_account_id; o_key_id := rr.o_key_id;
                o_model := rr.o_model; o_amount := rr.o_amount; o_pool := rr.o_pool;
                o_state := rr.o_state; o_charged := rr.o_charged;
                o_created_at := rr.o_created_at; o_expires_at := rr.o_expires_at;
            END IF;
        ELSE
            v_pos := array_position(v_res, p_res_id[i]);
            IF v_pos IS NULL OR NOT v_res_accts[v_pos] = ANY (v_accts) THEN
                -- Not locked by this batch (or missing: the caller's own call says so).
                o_outcome := 'deferred';
            ELSIF p_kind[i] = 2 THEN
                SELECT * INTO rc FROM ledger_commit(p_res_id[i], p_actual[i], p_input_tokens[i],
                    p_output_tokens[i], p_units[i]::jsonb, p_upstream_model[i], p_channel[i], p_now[i]);
                o_outcome := rc.o_outcome; o_charged := rc.o_charged; o_capped := rc.o_capped;
                o_state := rc.o_state;
            ELSE
                SELECT * INTO rc FROM ledger_release(p_res_id[i], p_reason[i], p_now[i]);
                o_outcome := 'released'; o_state := rc.o_state; o_charged := rc.o_charged;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
