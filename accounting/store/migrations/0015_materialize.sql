-- 0014_materialize: where the materializer (accounting/engine/materialize) records how
-- far it has written the journal's events into the tables the console reads.
--
-- With issue 42 the ledger's decisions are made in memory by the owner of a shard and
-- journaled; accounts, tiers, api_keys, ledger_entries (and usage_daily through its
-- trigger), key_spend and video_tasks become data derived from the journal. Each
-- materializer transaction writes a batch of events and moves its shard's seq to the
-- last event's in the same transaction, so a batch is written exactly once whatever
-- crashes or retries: a batch whose events are at or below seq is skipped.
--
-- The journal's own migration creates this table too, with the same two columns first;
-- whichever runs first makes it. What is not written any more: the reservations table
-- (held reservations live in the owner's memory and in the journal; the charge's
-- foreign key to reservations already went in 0010, and the one-charge-per-reservation
-- constraint stays), and the accounts' requests-per-minute window (rpm_minute,
-- rpm_count), which only the owner's decisions read. Balances, holds, pools and key
-- spend windows are written as they change, so the tables' CHECK constraints keep
-- holding.

CREATE TABLE IF NOT EXISTS ledger_materialized (
    shard integer PRIMARY KEY,
    seq   bigint NOT NULL
);
