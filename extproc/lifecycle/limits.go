package lifecycle

// The ledger's refusals by a limit — a key's or a project's spend window, an rpm or a
// tpm, a project's model allowlist — as the client's errors. The refusal's Limit names
// the limit: "daily" and "monthly" (the key's spend), "rpm" (the account's tier),
// "key:rpm", "key:tpm", "project:ID:daily|monthly|lifetime|rpm|tpm|models".

import (
	"strconv"
	"strings"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
)

// limitOwner is whose limit refused: the owner's name in a message ("the key",
// "project ID", "the account") and the limit's own name ("daily", "tpm", ...).
func limitOwner(l string) (who, name string) {
	if rest, ok := strings.CutPrefix(l, "project:"); ok {
		if i := strings.LastIndexByte(rest, ':'); i > 0 {
			return "project " + rest[:i], rest[i+1:]
		}
		return "a project of the key", rest
	}
	if rest, ok := strings.CutPrefix(l, "key:"); ok {
		return "the key", rest
	}
	if l == "rpm" {
		return "the account", l
	}
	return "the key", l
}

// spendRefusal is a key's or a project's spend window refusing the hold: 429
// key_limit_reached naming the owner and the window, with Retry-After when the window's
// end or a hold in flight would free it.
func spendRefusal(ref *ledger.Refusal) *apierr.Error {
	who, window := limitOwner(ref.Limit)
	msg := "The request would cross a spend limit of " + who + "."
	switch window {
	case "daily":
		msg = "The request would cross the daily spend limit (UTC day) of " + who + "."
	case "monthly":
		msg = "The request would cross the monthly spend limit (UTC month) of " + who + "."
	case "lifetime":
		msg = "The request would cross the lifetime spend limit of " + who + "."
	}
	e := apierr.New(apierr.KeyLimitReached, msg)
	e.RetryAfter = max(ref.RetryAfter, 0)
	return e
}

// rateRefusal is an rpm or a tpm refusing the request: 429 rate_limit_exceeded with
// Retry-After (whole seconds until it would fit), except for a request whose token
// bound (tokens) exceeds the tpm itself, which can never fit: its message says so and
// no Retry-After is sent.
func rateRefusal(ref *ledger.Refusal, tokens int64) *apierr.Error {
	who, name := limitOwner(ref.Limit)
	var msg string
	switch {
	case name == "tpm" && ref.RetryAfter <= 0:
		msg = "The request is larger than the tokens-per-minute limit of " + who + ": its token bound (" +
			strconv.FormatInt(tokens, 10) + " tokens, the input's estimate plus the output-token limit) can never fit. " +
			"Lower the output-token limit or send a shorter input."
	case name == "tpm":
		msg = "The tokens-per-minute limit of " + who + " is used up: the request's token bound (" +
			strconv.FormatInt(tokens, 10) + " tokens) fits again after Retry-After."
	case who == "the account":
		msg = "The account's requests-per-minute limit is exceeded."
	default:
		msg = "The requests-per-minute limit of " + who + " is exceeded."
	}
	e := apierr.New(apierr.RateLimitExceeded, msg)
	e.RetryAfter = max(ref.RetryAfter, 0)
	return e
}

// modelNotAllowed is the refusal of a model by a project on the key's path: the one
// ref names (a refusal of the ledger's), or, with a nil ref, one of them.
func modelNotAllowed(model string, ref *ledger.Refusal) *apierr.Error {
	who := "A project of this key"
	if ref != nil && strings.HasPrefix(ref.Limit, "project:") {
		p, _ := limitOwner(ref.Limit)
		who = "The key's " + p
	}
	return apierr.Param(apierr.ModelNotAllowed, "model", who+" does not allow the model '"+model+"'.")
}
