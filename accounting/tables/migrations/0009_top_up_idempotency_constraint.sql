---- tern: disable-tx ----
-- 0009_top_up_idempotency_constraint: the constraint ledger_entries_idempotency goes, now
-- that ledger_top_up (0008) finds a repeated key through the partial index of 0007.
--
-- First the wait: a call of ledger_top_up that began before 0008 committed still runs the
-- body that names the constraint (PL/pgSQL checks a function's definition when a call
-- begins, not during it; such a call may be waiting for its account's lock), and would
-- fail once it is gone. A call is a statement of its own (Store.TopUp), so every statement
-- of this database still running since before this one is waited for (client sessions
-- only; an idle session, in a transaction or not, runs no call, and one it makes later
-- runs the new body, as does every call that begins after 0008). Outside a transaction
-- (the line above), so that each round reads the sessions afresh and holds no snapshot.
--
-- Then the drop: ALTER TABLE takes an ACCESS EXCLUSIVE lock on ledger_entries for a
-- catalog update (milliseconds, once the transactions using the table have ended).

DO $$
DECLARE
    v_mark timestamptz := statement_timestamp();
BEGIN
    LOOP
        PERFORM pg_stat_clear_snapshot();
        EXIT WHEN NOT EXISTS (
            SELECT 1 FROM pg_stat_activity
             WHERE datname = current_database() AND backend_type = 'client backend'
               AND pid <> pg_backend_pid() AND state = 'active' AND query_start < v_mark);
        PERFORM pg_sleep(0.01);
    END LOOP;
END
$$;

ALTER TABLE ledger_entries DROP CONSTRAINT IF EXISTS ledger_entries_idempotency;
