// Package journal is the ledger's durable log in PostgreSQL: per shard, a sequence of
// opaque records (the encoded events of the owner's decisions), the lease that says
// which process owns the shard, the snapshots a restart or a standby starts from, and
// retention. It does not know what the records mean: another package encodes them.
//
// # Writing and fencing
//
// One process at a time owns a shard. It becomes the owner with Acquire, which raises
// the shard's epoch whenever the lease passes to another owner or had expired, keeps it
// with Renew, and appends with Append, giving its epoch. The owner numbers the records:
// consecutive sequence numbers, the first following the last one in the journal
// (starting at 1), and it appends one batch at a time, so records commit in sequence
// order and a reader never sees a gap that is filled later.
//
// Append is one statement, in one round trip and one transaction (one commit, so one WAL
// flush per batch): it takes the shard's ledger_owner row FOR SHARE when, and only when,
// the row still has the caller's epoch, and inserts the batch only then, and only if the
// record before the batch's first is there. Acquire updates that row, so it waits for
// every Append of the old epoch still in flight to commit; an Append that starts after it
// finds another epoch and inserts nothing (ErrFenced). So once Acquire has returned, Last
// sees every record the old owner will ever have written, and the new owner continues
// after it. The lease's time only decides when another process may take over; the epoch
// alone decides whose records are written.
//
// A standby follows the journal by polling Read: an empty poll is one index
// probe, where a NOTIFY from every Append would serialize the commits of all notifying
// sessions on the server's notification queue.
//
// # Retention
//
// ledger_journal is partitioned by range of (shard, seq), each partition one shard's run
// of Options.PartitionSize sequence numbers. Append creates the next partition when the
// current one is entered, so that a whole partition's room is always ahead; it attaches
// it, which inserts do not wait for. DropCovered detaches and drops the partitions whose
// every record is covered by a snapshot taken at least the retention age ago and is
// materialized into the derived tables (ledger_materialized); it never drops the
// partition holding a covering snapshot's own record, so the last record stays and the
// next Append still finds its predecessor. A snapshot's time tells how old the records
// it covers are: records are kept at least the retention age after a snapshot covering
// them was taken. SaveSnapshot keeps the bodies of the newest Options.KeepSnapshots
// snapshots and only the sequence number and time of older ones, which DropCovered
// deletes once they are older than the one it used.
//
// It imports only pgx and the standard library (and accounting/tables/tablestest in its
// tests); in particular not the state machine (accounting/engine/machine).
package journal
