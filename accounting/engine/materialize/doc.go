// Package materialize keeps the PostgreSQL tables that the console's reports read
// (accounts, tiers, api_keys, ledger_entries with its usage_daily rollup, key_spend,
// video_tasks, projects, the alert outbox) as data derived from the ledger state machine's
// journaled events, and moves a ledger from the PostgreSQL store's own decisions to the state machine's.
//
// Load reads the store's tables into a machine.Snapshot: the state the machine starts
// from when a ledger kept by the store is taken over. A Materializer is fed the events
// of one shard in journal order, with their sequence numbers, and writes each call's
// events in one transaction of a handful of set-based statements, recording the last
// sequence number in ledger_materialized in the same transaction so that every event
// is written exactly once across crashes and retries.
//
// It takes events, not journal records: it must not import the journal, gRPC or any
// transport. It imports the state machine only for its event and snapshot types,
// accounting/alerts for an alert's webhook body, and pgx for the database.
package materialize
