package lifecycle

import (
	"time"

	"github.com/llmgw/gateway/extproc/wire"
)

// The time budget of a request, in one place. The README's "Time budget" table says the
// same for operators; envoy/envoy.yaml's ext_proc settings must agree with it (a test in
// envoy/ checks them).
//
// Envoy arms a timer (message_timeout) for every message it sends extproc and fails the
// request when no reply came in time: 504 before the response started, a reset after.
// So nothing that can outlast that timer runs before a reply:
//
//   - Request body: authentication and the reservation (retries included) get
//     AdmitBudget; past it the client gets our 503 (retryable) and a hold that may have
//     been made meanwhile is found under its idempotency key and released in the
//     background (abandonReserve).
//   - Response headers and body: no ledger call at all. Settlement (commit or release)
//     runs after the reply, in the background, and the hold's lease is renewed by its
//     own keeper, never on the message path. The only exception is recording a video
//     task before its id reaches the client (recordTimeout, also under the timer).
//
// A hold is a lease: accounting expires it LeaseTTL after its last renewal, and its
// owner renews it every LeaseTTL/3 while the request runs and until it is settled. A
// dead owner's holds therefore free within LeaseTTL plus the sweeper's period (1 s);
// a live owner keeps its holds for as long as its streams run.
//
// A settlement is retried until accounting answers it, however long accounting is away
// (it is idempotent by reservation id), and the hold's keeper renews the lease all the
// while: accounting does not expire a lease that ran out while it was away until a grace
// period after it is back (accounting/app's sweeper), by when the keeper has renewed it
// and the settlement has landed. So an accounting outage, whatever its length, loses no
// charge of a live extproc. Only a hold accounting expires while it serves — its owner
// died, or could not reach it for more than what was left of the lease — is free: never
// charged twice, never charged after the client was told it failed.
const (
	// EnvoyMessageTimeout is envoy.yaml's ext_proc message_timeout.
	EnvoyMessageTimeout = 2 * time.Second
	// AdmitBudget bounds the ledger calls of the request-body phase, retries included:
	// three quarters of the message timeout, leaving room for parsing, counting and
	// the gRPC hops.
	AdmitBudget = EnvoyMessageTimeout * 3 / 4
	// DefaultLeaseTTL is a hold's lease (EXTPROC_HOLD_LEASE).
	DefaultLeaseTTL = 60 * time.Second
	// settleAttemptTimeout bounds one settlement call; the call is retried after it.
	settleAttemptTimeout = 5 * time.Second
	// maxSettleBackoff caps the pause between two settlement attempts.
	maxSettleBackoff = 2 * time.Second
)

// EnvoyBufferLimit is envoy.yaml's listener per_connection_buffer_limit_bytes: the most
// Envoy buffers of a request body, as the client sent it or as extproc rewrote it for the
// upstream (Envoy applies the limit to the mutated body), and of a response body. It is
// twice the API's limit on the client's bytes (wire.MaxBodyBytes, which extproc
// enforces), so that rewriting a body the client was allowed to send (a longer upstream
// model id, stream_options, a translation) still fits. A test in envoy/ checks envoy.yaml
// agrees.
const EnvoyBufferLimit = 2 * wire.MaxBodyBytes
