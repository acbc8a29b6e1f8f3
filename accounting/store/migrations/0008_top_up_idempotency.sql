-- 0008_top_up_idempotency: top-ups find a repeated idempotency key by the
-- partial index of 0007, and the constraint that indexed every entry goes.
--
-- A top-up with a key conflicts with an earlier entry of the same account and key
-- exactly as before: the partial index holds every entry with a key, and an entry
-- without one never conflicted (NULLs are distinct). Charges never have a key.
--
-- In one transaction: the function is replaced before the constraint it named is
-- dropped. DROP CONSTRAINT takes an ACCESS EXCLUSIVE lock on ledger_entries for a
-- catalog update (milliseconds, once the transactions using the table have ended).

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

ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_idempotency;
