-- 0004_storage: per-table storage settings that keep the ledger's hot tables small and
-- their updates HOT (heap-only: the new row version goes on the same page with no new
-- index entry, and the old one is pruned without VACUUM). Measured with `make soak`
-- (docs/performance.md; docs/operations.md, "PostgreSQL: keeping the tables small").
--
-- Only storage parameters: no data changes and no rewrite. ALTER TABLE … SET (…) takes a
-- SHARE UPDATE EXCLUSIVE lock, which blocks neither reads nor writes (it waits for, or
-- cancels, a running autovacuum of the table). A new fillfactor applies to the pages
-- written from now on; rows already packed into full pages move out at their next update.
--
-- What a reserve+commit pair writes:
--   accounts     2 updates of the account row (reserve, commit; once per account per
--                group-commit batch), no indexed column changes: HOT when its page has room.
--   key_spend    an upsert and an update of each of the key's 2 windows (day, month): HOT
--                likewise.
--   usage_daily  1 upsert (the charge's trigger): HOT likewise.
--   reservations 1 insert, then 1 update (held -> committed/released/expired) that is never
--                HOT: `state` is in the predicate of reservations_held_expiry (the sweeper's
--                queue), and a change of a column an index uses — key or predicate — makes
--                an update non-HOT. That index must know which rows are held, so the update
--                leaves one dead version per request (and new entries in the primary key and
--                request id indexes) for VACUUM to reclaim.
--   ledger_entries 1 insert; never updated.

-- The small, update-heavy tables: a few rows (accounts, keys × periods, accounts × days ×
-- keys × models) each updated at request rate. Free room on every page lets each update
-- stay HOT even while pruning cannot yet remove older versions (a long report, a backup or
-- a replica's feedback holding back the horizon); the space costs little on tables this
-- small. VACUUM every naptime once a few thousand row versions died, whatever the table's
-- size, and without the cost throttle: each run is a few milliseconds.
ALTER TABLE accounts SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0);

ALTER TABLE key_spend SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0);

ALTER TABLE usage_daily SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0);

-- The growing tables: one row per request (reservations) or per charge and top-up
-- (ledger_entries). The default thresholds (20 % of the table) let dead versions and
-- un-vacuumed inserts grow with the table: 2 million dead reservations before a vacuum of a
-- 10-million-row table. 1 % keeps the dead versions few, so VACUUM's freed space is
-- reused by the next inserts instead of the table growing, keeps the visibility map
-- current for index-only scans, freezes in small steps instead of one huge
-- anti-wraparound pass, and refreshes the planner's statistics as the tables grow.
-- No fillfactor: a reservation is updated once and that update cannot be HOT, and
-- ledger entries are never updated, so free room on their pages would stay empty.
ALTER TABLE reservations SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.01);

ALTER TABLE ledger_entries SET (
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.01);
