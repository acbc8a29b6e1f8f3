-- 0014_journal: the ledger's journal (issue 42; package accounting/engine/journal).
--
-- One owner process per shard decides every hold and charge in memory and appends each
-- decision to the journal before answering; a standby tails it and takes over. The
-- tables of the earlier migrations become data derived from the journal.
--
-- ledger_journal holds the records, one row each: the shard's sequence number, the
-- epoch of the owner that wrote it (its fencing token) and the encoded events, which
-- only the writer and the readers understand. The journal package only inserts and
-- reads. The primary key (shard, seq) makes a sequence number unique per shard.
--
-- It is partitioned by range of (shard, seq): each partition holds one shard's run of
-- consecutive sequence numbers. The writer creates and attaches partitions ahead of the
-- records (ATTACH takes SHARE UPDATE EXCLUSIVE on the parent, which inserts do not wait
-- for); retention detaches and drops the partitions that a snapshot older than the
-- retention age covers (DETACH … CONCURRENTLY), so no row is ever deleted. There is no
-- default partition: a record with no partition is refused rather than kept where
-- retention would have to scan for it. This migration creates none: the writer makes the
-- first one of a shard with its first record.
CREATE TABLE ledger_journal (
    shard integer NOT NULL,
    seq   bigint  NOT NULL,
    epoch bigint  NOT NULL,
    body  bytea   NOT NULL,
    PRIMARY KEY (shard, seq)
) PARTITION BY RANGE (shard, seq);

-- The owner of each shard: the epoch of its lease (raised by every takeover; a record is
-- inserted only while its epoch is still this one), who holds it, where clients reach
-- it, and until when (the database's clock).
CREATE TABLE ledger_owner (
    shard       integer PRIMARY KEY,
    epoch       bigint      NOT NULL CHECK (epoch > 0),
    owner       text        NOT NULL,
    addr        text        NOT NULL,
    lease_until timestamptz NOT NULL
);

-- Snapshots of a shard's state as of a record: the newest few keep their body; older
-- ones keep only their sequence number and time (body NULL), which retention needs to
-- know how old the records a snapshot covers are.
CREATE TABLE ledger_snapshots (
    shard    integer     NOT NULL,
    seq      bigint      NOT NULL CHECK (seq >= 0),
    taken_at timestamptz NOT NULL DEFAULT now(),
    body     bytea,
    PRIMARY KEY (shard, seq)
);

-- How far the derived tables hold a shard's records (written by the materializer).
-- Retention drops no record that is not materialized yet.
CREATE TABLE ledger_materialized (
    shard integer PRIMARY KEY,
    seq   bigint NOT NULL CHECK (seq >= 0)
);
