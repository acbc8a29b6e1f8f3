-- 0008_top_up_idempotency: top-ups find a repeated idempotency key by the partial index
-- of 0007 instead of naming the constraint ledger_entries_idempotency, which 0009 drops.
--
-- A top-up with a key conflicts with an earlier entry of the same account and key
-- exactly as before: the partial index holds every entry with a key, and an entry
-- without one never conflicted (NULLs are distinct). Charges never have a key.
--
-- Not in the same transaction as the drop: a call of the function that began before this
-- migration committed runs the body it began with, and that body names the constraint.
-- 0009 waits for such calls to end before it drops it.

CREATE OR REPLACE FUNCTION ledger_top_up(p_account_id uuid, p_amount bigint, p_idempotency_key text, p_now timestamptz)
RETURNS SETOF accounts LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM accounts WHERE id = p_account_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key, created_at)
    VALUES (p_account_id, 'top_up', p_amount, nullif(p_idempotency_key, ''), coalesce(p_now, now()))
    ON CONFLICT (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
    IF FOUND THEN
        UPDATE accounts SET balance = balance + p_amount, topped_up = true WHERE id = p_account_id;
    END IF;
    RETURN QUERY SELECT * FROM accounts WHERE id = p_account_id;
END
$$;
