// Package lifecycle is the request lifecycle of the gateway's data plane: for one HTTP
// request it routes the endpoint, validates the body, admits the request (key, account,
// model, price, reservation), picks an upstream channel and says how to mutate the
// request; on the way back it observes the response and settles the reservation
// (commit or release) exactly once.
//
// It knows nothing of Envoy or protobuf: the Envoy adapter calls the phase methods of a
// Request (RequestHeaders, RequestBody, ResponseHeaders, ResponseBody, End) and turns the
// neutral Action each returns into ext_proc messages. It talks to accounting only
// through the small Ledger interface, with the ledger package's domain types and
// *ledger.Refusal errors (read with errors.As, never from strings).
//
// # Admission order
//
//  1. Body too large (413): checked on content-length in the headers phase, and again
//     on the buffered body (chunked bodies have no content-length).
//  2. JSON and field validation (400): before the key. A body that is not UTF-8 is
//     refused first. Then one linear pass refuses
//     nesting deeper than MaxJSONDepth and a key repeated in any object at any depth
//     (parsers disagree on which copy wins; see checkJSONShape). Validation needs nothing but the
//     bytes, costs no accounting round trip, and reveals nothing the public spec does
//     not: an unauthenticated caller learns only that a body is malformed. A flood of
//     garbage never reaches accounting. (OpenAI checks the key first; what leaks either
//     way is the same public rule set, so we prefer the order that protects accounting.)
//     Exception: a key that is missing, malformed or ambiguous (two different keys) is
//     refused at the request headers, before the body is buffered or read: the check
//     needs no accounting call, and an unauthenticated client then holds neither a
//     2 MiB buffer nor an ext_proc stream. Such a request with a bad body therefore gets
//     401, not 400; a well-formed key still waits for validation.
//  3. Key present and valid (401 invalid_api_key): missing, malformed, unknown,
//     disabled, expired or revoked; two different keys (Authorization and x-api-key,
//     or either header repeated) are refused, never served on one of them.
//  4. Account suspended (403 account_suspended).
//  5. Model known and served on this endpoint: an unknown public id, or a model of
//     another kind (a Messages model on /chat/completions), is 403 model_not_available
//     ("no route candidate for the model is available to the key"). The id already
//     passed the invalid_model shape rule, so 400 invalid_model would be wrong; and the
//     public catalog is public, so nothing leaks.
//  6. Model in the key's allowlist (403 model_not_allowed; empty allowlist = all) and in
//     the allowlist of every project on the key's path (the grant's EffectiveModels,
//     from accounting; the ledger checks the projects again when it reserves).
//  7. Paid model on an account without a top-up (403 model_requires_topup).
//  8. An enabled channel open to the account's tier (403 model_not_available).
//  9. Complete published price (503 pricing_unavailable): before any upstream call or
//     charge. A request for server-side tools the provider bills per use (web search,
//     code execution: wire.Parsed.Unpriced) has no published price either and is refused
//     here, naming the field, as is a part whose size cannot be known before the
//     provider fetches it (a document by URL or file id: wire.Prompt.Unbounded), whose
//     cost no hold can bound, and a PDF sent by its bytes whose pages cannot be counted
//     (documents.go: the pages are counted here, after the key, so that anonymous
//     callers cannot make the gateway parse PDFs); count_tokens, which is not billed, is
//     exempt.
//  10. Output limit within the model's published maximum: a request asking for more
//     than max_output_tokens is refused with 400 invalid_max_tokens naming the maximum
//     (rather than clamped: clamping would need a body edit the client did not ask
//     for, and the hold must bound what the upstream may produce).
//     A chat request naming a service_tier (other than auto or a base-tier name) or an
//     inference_geo the model's rate card does not price is refused with 400
//     invalid_request naming the param (ratecard.go).
//     The same step applies the other endpoints' model rules: a speech voice the model
//     lists; a video duration inside the model's range (invalid_duration naming it),
//     the model's resolution tier (resolution_not_priced) and a webhook URL whose host
//     resolves to public addresses (invalid_webhook_url; its syntax was checked in step
//     2, the resolution waits for a valid key so that anonymous callers cannot make the
//     gateway resolve names).
//  11. Reserve the maximum estimated cost and the token bound (402 insufficient_credits,
//     403 model_not_allowed by a project, 429 key_limit_reached / concurrency_limit_exceeded /
//     rate_limit_exceeded with Retry-After; taken from the Refusal's reason, limit and
//     retry_after: limits.go).
//
// Only then is a channel picked and the request mutated.
//
// # Channel formats
//
// A channel's format (its upstream's wire format) is one row of the format table, which
// lives with the codecs (translate.Format): the chat API its codec speaks, its default
// base path (a channel's base_path replaces it; {project} and {location} are the
// channel's gcp.project and gcp.location), its paths (the model path-escaped), its
// credential style. formats.go reads the row and the rest of the lifecycle never asks
// which format a channel has (TestFormatTableInPackageDoc keeps this copy equal):
//
//	format            chat API         base                                        path after the base: answer | stream
//	anthropic         messages         /v1                                         /messages | /messages
//	bedrock           bedrock          -                                           /model/MODEL/converse | /model/MODEL/converse-stream
//	gemini            gemini           /v1beta                                     /models/MODEL:generateContent | /models/MODEL:streamGenerateContent?alt=sse
//	openai            chat             /v1                                         /chat/completions | /chat/completions
//	vertex-anthropic  vertex-messages  /v1/projects/{project}/locations/{location} /publishers/anthropic/models/MODEL:rawPredict | /publishers/anthropic/models/MODEL:streamRawPredict
//	vertex-gemini     gemini           /v1/projects/{project}/locations/{location} /publishers/google/models/MODEL:generateContent | /publishers/google/models/MODEL:streamGenerateContent?alt=sse
//
// A new upstream format is one codec in extproc/translate (its request, response and
// stream halves; for an API no client speaks, an entry in its upstream-only table) and
// one row of its format table: no lifecycle file changes. Its answers are normalized into the
// bytes of a client API (translate.Normalizer) before the response rewriter reads their
// usage, so settlement, failover and error classification stay as they are.
//
// # Units
//
// Token endpoints (chat, messages, responses) hold the estimate above and commit the
// upstream's usage. Embeddings hold the input's estimate (token ids counted exactly) and
// commit usage.prompt_tokens. Speech holds and commits the exact cost of the input's
// Unicode code points (on a 2xx audio response; the body bypasses extproc). Images hold
// and commit one image. Video holds and commits duration × price per second once the
// upstream returned a task id and accounting recorded the task (before the response
// reaches the client).
//
// GET /v1/videos/{taskId} is decided in the headers phase: invalid_task_id, the key,
// then the task's owner (the account, or the key alone for an admin-created key) and age
// by accounting's clock (task_not_found, task_expired); a readable task is routed,
// unbilled, to its model's highest-priority channel.
//
// # Record
//
// What became of a request is told once, by the lifecycle itself: each hold when it is
// made, and the request's Record (its Facts, how it was answered, and its settlement as
// it landed) when it is over, to the Service's Observers (record.go). The settled log
// line, the metrics and any other observer read that one record; the access log's facts
// go with each reply (Facts), from the same settlement the Record carries.
//
// A Request is not safe for concurrent use: the adapter drives it from one goroutine.
// A Service is safe for concurrent use.
package lifecycle
