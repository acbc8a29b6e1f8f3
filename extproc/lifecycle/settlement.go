package lifecycle

// The settlement policy of a request whose stream ended before it was settled: one pure
// decision over what the request's lifecycle saw, mirrored by docs/lifecycle.md's settlement
// rules and by its table test. (Complete answers are settled where they end: their
// usage is committed, or a usable answer without usage is released.)

// endFacts is what a request's lifecycle knows when its stream ends unsettled.
type endFacts struct {
	// Sent: the request was let through to the provider (its body reply carried the
	// rewritten request). Before that, nothing reached a provider.
	Sent bool
	// Failed: the provider answered with an error or an unusable answer.
	Failed bool
	// Usage: the provider's usage was read (it came before the end of the answer).
	Usage bool
	// Delivered: part of a streamed (SSE) answer reached the client.
	Delivered bool
	// Tokens: the endpoint is priced by tokens (chat, messages, responses,
	// embeddings), so its prompt has a price of its own.
	Tokens bool
	// ClientLeft: Envoy ended the stream (the client went away, or the request ended
	// normally). Otherwise extproc ended it (a panic, a gRPC error, its own stop cutting
	// the stream): Envoy then answers the client 500 (failure_mode_allow false) and
	// nothing beyond what was already delivered may be charged.
	ClientLeft bool
}

// CauseClientLeft is End's cause when Envoy ended the stream (EOF or a reset from Recv);
// every other cause is extproc's own failure.
const CauseClientLeft = "stream_closed"

// endRule is what is charged.
type endRule int

const (
	// endRelease: nothing is charged.
	endRelease endRule = iota
	// endUsage: the provider's usage, at the model's price (what the provider billed).
	endUsage
	// endDelivered: what the stream delivered, counted locally: the prompt as counted
	// and the output text sent.
	endDelivered
	// endPrompt: the prompt as counted locally, no output. Providers bill a request
	// they received whether or not anyone reads the answer; the prompt is the part of
	// that bill the gateway knows for sure.
	endPrompt
)

func (e endRule) String() string {
	return [...]string{"release", "usage", "delivered", "prompt"}[e]
}

// decideEnd is the settlement policy of an unsettled request at the end of its stream.
func decideEnd(f endFacts) endRule {
	switch {
	case !f.Sent, f.Failed:
		return endRelease
	case f.Usage:
		return endUsage
	case f.Delivered:
		return endDelivered
	case f.Tokens && f.ClientLeft:
		return endPrompt
	}
	// A per-unit request (speech, images, video) is charged on the provider's answer
	// alone: without one, the gateway cannot tell a generated unit from a failed one.
	// A request extproc failed itself got Envoy's 500: its prompt is not charged.
	return endRelease
}
