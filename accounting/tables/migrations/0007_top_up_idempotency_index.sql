---- tern: disable-tx ----
-- 0007_top_up_idempotency_index: a unique index of the top-ups' idempotency keys only,
-- to replace the constraint ledger_entries_idempotency (0008, 0009).
--
-- That constraint's index held every ledger entry, and only top-ups have a key: every
-- charge (one per request) paid an insert of an entry (account, NULL) that no lookup
-- ever reads (4.0 MB after 400,000 charges over 256 accounts, `make soak`; this one:
-- 8 kB). Its comment also gave it the reading of an account's entries, which
-- ledger_entries_account_newest has done since 0002.
--
-- Built CONCURRENTLY, outside a transaction (the line above), so that charges and
-- top-ups go on while it is built over a large table. A build that fails or is
-- interrupted leaves an invalid index of this name behind; the DROP first makes a new
-- run of this migration start over instead of keeping it. A migrator must not wait for
-- another's lock inside a statement meanwhile (accounting/store, lockMigrations).

DROP INDEX CONCURRENTLY IF EXISTS ledger_entries_top_up_idempotency;

CREATE UNIQUE INDEX CONCURRENTLY ledger_entries_top_up_idempotency
    ON ledger_entries (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
