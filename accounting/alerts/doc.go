// Package alerts delivers the ledger's alerts as signed webhooks: the JSON body of each
// alert event (Body), the Standard Webhooks signature (Sign), the subscriptions with
// their secrets sealed at rest (Webhooks, Keys), and the owner's delivery worker
// (Worker) that works off the outbox the materializer fills.
//
// The alerts themselves are decided by the ledger's state machine (machine.Alerted,
// recorded in the batch of the decision that caused them); this package never decides
// one. It imports the machine for the event's type, extproc/webhook for the URL rules
// of the video webhook_url, pgx and net/http; no gRPC and nothing of the engine.
package alerts
