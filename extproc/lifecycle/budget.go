package lifecycle

import (
	"time"

	"github.com/llmgw/gateway/extproc/wire"
)

// The time budget of a request, in one place. docs/lifecycle.md's "Time budget" table says the
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
// A settlement is retried until it lands or is refused for good: an accounting outage
// (or a row lock) shorter than what is left of the hold's lease — at least two thirds of
// LeaseTTL, since the keeper renews every third — loses no charge. Past that, the
// sweeper may expire the hold first, and then the request is free: never charged twice,
// never charged after the client was told it failed. Retries stop one lease after the
// hold's last confirmed expiry.
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
