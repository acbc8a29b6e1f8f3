-- 0015_materialize: where the materializer (accounting/engine/materialize) records how
-- far it has written the journal's events into the tables the console reads.
--
-- With issue 42 the ledger's decisions are made in memory by the owner of a shard and
-- journaled; accounts, tiers, api_keys, ledger_entries (and usage_daily through its
-- trigger), key_spend, reservations and video_tasks become data derived from the
-- journal. Each materializer transaction writes a batch of events and moves its
-- shard's seq to the last event's in the same transaction, so a batch is written
-- exactly once whatever crashes or retries: a batch whose events are at or below seq
-- is skipped.
--
-- The journal's own migration creates this table too, with the same two columns first;
-- whichever runs first makes it. Reservations are written once per batch each: a
-- reservation made and settled in one batch is inserted in its final state, one
-- settled (or renewed) in a later batch is updated once; settled rows stay until the
-- sweeper's archive moves them, as before. What is not written any more: the accounts'
-- requests-per-minute window (rpm_minute, rpm_count), which only the owner's decisions
-- read. Balances, holds, pools and key spend windows are written as they change, so
-- the tables' CHECK constraints keep holding.

CREATE TABLE IF NOT EXISTS ledger_materialized (
    shard integer PRIMARY KEY,
    seq   bigint NOT NULL
);
