// Package failover holds only tests: process-level proofs of the journal engine's
// failover (accounting/engine). Its tests build the
// accounting binary once, run two or three real accounting processes on one fresh
// database with a short lease, and drive them over gRPC as the gateway does, retrying
// an unavailable ledger with the same request and reservation ids.
//
// What they prove:
//
//   - Killing the owner (SIGKILL) under load, at whatever point of its batch it is,
//     loses no answered decision and makes none twice: every answered charge is in the
//     balance exactly once, no hold is left behind, a retried reserve returns the
//     reservation it made and a retried commit is replayed with its first charge. The
//     tests log how long a standby took to answer after each kill (the takeover time).
//
//   - An owner paused (SIGSTOP) while a standby took over is fenced when it resumes:
//     it exits non-zero and never writes a journal record again, so the journal's
//     epochs only grow with its sequence numbers.
//
//   - Folding the journal from its first snapshot gives the state a fresh process
//     answers with and the derived tables the materializer wrote.
//
//   - extproc's ledger client, dialled to both replicas, calls the owner directly at
//     steady state: no call reaches the standby (forwarded or redirected).
//
//   - Through extproc's ledger client, with the default settings: a kill -9 of the owner
//     costs the clients no error, a pause of either replica only its first seconds, and
//     no hold is left for a caller that gave up.
//
// It must not be imported: it has no code but this comment. Its tests import the
// service only as a binary and through gRPC (extproc's ledger client included), plus
// the journal, codec and state machine to read the journal back.
package failover
