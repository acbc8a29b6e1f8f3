// Package translate turns a chat request, response and stream of one chat API into
// another's, both ways, so that any chat model answers on any chat API: a client speaking
// OpenAI Chat Completions can be served by an Anthropic Messages channel, a Claude-style
// client by an OpenAI channel, a Responses client by either, and so on.
//
// # Shape
//
// Every API is one codec (a table entry in codecs, translate.go) that reads and writes
// the neutral model of this package (neutral.go, event.go):
//
//	client bytes --decodeRequest(client)--> Request --encodeRequest(upstream)--> upstream bytes
//	upstream bytes --decodeResponse(upstream)--> Response --encodeResponse(client)--> client bytes
//	upstream SSE --streamDecoder(upstream)--> []Event --streamEncoder(client)--> client SSE
//
// A Translator is one (client API, upstream API) pair: the client's codec on one side, the
// upstream's on the other. Same-format requests are not translated at all (New reports
// false): the lifecycle keeps its in-place edits, and provider extension fields pass
// through untouched.
//
// Adding an API is one codec (its request, response and stream halves, each a pure
// function of bytes) with its table of what it does with each feature
// (upstream_fields.go), and one entry in codecs (a client API) or upstreamOnly (an API no
// client speaks: its name, framing, stream media type, fields table and docs title);
// every pair with the existing APIs follows.
//
// # Formats
//
// The format table (formats.go) is the one home of the upstream channel formats the
// catalog names: each row says which chat API a channel of the format speaks, its path
// shape (default base path, the model in the path and how it is escaped), its credential
// style (key and its default header, AWS Signature V4, Google service account) and
// whether it reads anthropic-version. The catalog validates channels against it and the
// lifecycle routes by it; a new cloud is one codec and one row (TestFormatRowsComplete
// checks each row is whole).
//
// # Rules
//
// A field with no counterpart on the other side is dropped when losing it changes nothing
// the client can observe in the answer's meaning (a tracing id, a store flag), and refused
// with an *Unsupported error naming the client's param when its meaning would be lost
// (n > 1, logprobs, a response format the target cannot honour). Two kinds of table are
// the one home of that decision: the client fields (fields.go), checked as the client's
// request is read, and per upstream API what it maps, drops or refuses of each feature
// the neutral Request can carry (features.go, upstream_fields.go), applied by admit
// before the upstream's encoder, which writes only what is left. docs/translation.md's
// conformance tables are rendered from them (conformance.go) and a test keeps them equal.
//
// Tool call ids are kept as the upstream gave them, in both directions, so a tool result
// the client sends back names the id the upstream chose. Usage is carried in full
// (input including cache reads and writes, output including reasoning) and rendered in
// the client's shape. Every response and event carries the public model id given in
// ResponseOptions, never the upstream's.
//
// Upstream error bodies are not translated here: the lifecycle classifies them
// (package response) and answers in the client's envelope, never with the provider's
// words. An error event inside a stream is translated into the client's error event.
//
// # Imports
//
// This package is bytes and values only: it must not import protobuf, gRPC, Envoy, the
// lifecycle, the catalog or accounting. It may import extproc/sse, JSON libraries,
// extproc/wire, whose Object and ForEach read a request body's members without walking
// the conversation again for each, and the AWS SDK's event-stream framing and path
// escaping.
package translate
