---- tern: disable-tx ----
-- 0013_ledger_entries_by_time: a BRIN index of the entries' times, for reconciliation
-- (Store.Reconcile), which reads every account's charges of a range of UTC days.
--
-- Entries are only appended, with the time of their commit, so their times follow the
-- table's physical order: a block-range index (a few pages per million entries, summed
-- up by autovacuum: autosummarize) narrows a range of days to the pages that hold it,
-- where a B-tree would add an index entry to every charge's insert on the hot path.
--
-- Built CONCURRENTLY, outside a transaction, like 0007: charges go on meanwhile; the
-- DROP first makes a new run start over from an interrupted build.

DROP INDEX CONCURRENTLY IF EXISTS ledger_entries_created_brin;

CREATE INDEX CONCURRENTLY ledger_entries_created_brin ON ledger_entries
    USING brin (created_at) WITH (autosummarize = on);
