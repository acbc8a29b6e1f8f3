-- 0010_reservations_archive: settled reservations move out of `reservations` into
-- `reservations_archive` once nothing can ask for them any more (Store.ArchiveSettled,
-- run by accounting's sweeper; docs/performance.md, docs/operations.md "Growth, and the archive").
--
-- Why: every request leaves a reservation, and `reservations` is the table the hot path
-- reads and writes: its request id index (random keys: Envoy's x-request-id) takes every
-- Reserve's insert and idempotency check on a random leaf page, and once the table's
-- indexes outgrow the server's cache each of those reads a page from disk. Kept to the
-- reservations of the last minutes, the table and its indexes stay the size of that
-- traffic, cached, whatever the ledger's age. The archive is written in batches in the
-- background, only appended to (ids in time order: 0006), never updated.
--
-- What may still ask for a settled reservation, and for how long: a Reserve retried with
-- its request id (extproc, within its hold lease), a settlement replayed with the
-- reservation's id (extproc's retries end one lease after the hold's last renewal), a
-- renewal racing a settlement. ArchiveSettled moves only reservations settled longer ago
-- than accounting's --archive-after (15 minutes by default, at least 5), far past all of
-- these; after it a replayed Commit or Release is answered not found, as for an id never
-- made.
--
-- A charge's reservation_id now names a row of either table, so the foreign key from
-- ledger_entries to reservations goes (a key cannot span two tables). What it guarded —
-- no charge without its reservation — is what the ledger's functions and the group commit
-- write in the same transaction as the reservation's settlement, and the invariant check
-- of the tests and the soak (storetest.CheckInvariants) verifies it over both tables.
-- ledger_entries_one_charge_per_reservation (a reservation is charged at most once) stays.
--
-- The archive has no foreign keys: its rows were checked when they were made, and
-- accounts and keys are never deleted. A foreign key check locks the referenced account
-- row FOR KEY SHARE until the archiving statement commits, and the group commit's writer,
-- which locks its accounts FOR UPDATE with a wait of 10 ms, would wait for it on the hot
-- path.
--
-- Locks: CREATE TABLE takes none on existing tables. Dropping the foreign key locks both
-- tables for a catalog update (milliseconds). ALTER TABLE would lock ledger_entries first
-- and then wait for reservations, while a settlement holds reservations (its UPDATE) and
-- waits for ledger_entries (its charge's INSERT): a deadlock, ended by failing one of
-- them. So both are locked first, in the ledger's order (reservations, then
-- ledger_entries), each try waiting at most 100 ms, so that calls queued behind it wait
-- no longer; a try that times out holds nothing, and the next follows 50 ms later. No
-- data moves here: the sweeper moves old rows in batches once accounting runs this
-- version.

CREATE TABLE reservations_archive (
    id             uuid PRIMARY KEY,
    request_id     text NOT NULL,
    account_id     uuid NOT NULL,
    key_id         uuid NOT NULL,
    model          text NOT NULL,
    amount         bigint NOT NULL CHECK (amount >= 0),
    pool           smallint NOT NULL CHECK (pool IN (1, 2)),
    -- Only settled reservations are archived.
    state          text NOT NULL CHECK (state IN ('committed', 'released', 'expired')),
    actual         bigint,
    charged        bigint NOT NULL CHECK (charged >= 0 AND charged <= amount),
    created_at     timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    settled_at     timestamptz NOT NULL,
    release_reason text,
    CONSTRAINT reservations_archive_charged_only_committed CHECK (state = 'committed' OR charged = 0)
);

-- Only the primary key: ids in time order go to its right edge. An index on request_id
-- (to look a request up from the access log's x-request-id) would take every move on a
-- random page, as `reservations`' own does: with it archiving cost the soak ≈10 % of its
-- pairs a second, ≈4 % without it (docs/performance.md); an operator who needs the
-- lookup can add it (CREATE INDEX CONCURRENTLY … ON reservations_archive (request_id)).

-- Insert-only, like ledger_entries: vacuum for the visibility map and freezing in small
-- steps, statistics as it grows.
ALTER TABLE reservations_archive SET (
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.01);

DO $$
BEGIN
    LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '100ms', true);
            LOCK TABLE reservations, ledger_entries IN ACCESS EXCLUSIVE MODE;
            PERFORM set_config('lock_timeout', '0', true);
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.05);
        END;
    END LOOP;
END
$$;

ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_reservation_id_fkey;
