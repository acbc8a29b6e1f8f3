package lifecycle

import "github.com/llmgw/gateway/extproc/apierr"

// Facts are what the lifecycle knows of a request when a reply leaves: the front's
// access log line carries them (the adapter hands them to Envoy as dynamic metadata).
// They never hold a credential or any part of the prompt or answer.
//
// Settlement runs after the last reply (budget.go), so a reply can carry the settlement
// that was decided, never the one that landed: the ledger stays the authority (a commit
// that never lands before its hold expires charges nothing), and the request's Record
// (record.go) carries the settlement as it landed. A request whose stream
// ends before its answer is settled by End, after Envoy's last reply: its line has no
// outcome.
type Facts struct {
	// Endpoint is the route template ("/v1/chat/completions"), "unknown" for any other
	// path.
	Endpoint string
	// Model is the public model id the request resolved to; for a request refused with
	// model_not_available for an id the catalog does not know, the id the body asked
	// for, so that the refusal's line says what was asked. "" before admission.
	Model string
	// Channel is the channel the request was routed to, "" before.
	Channel string
	// Held is true once a reservation of HoldMicros was made.
	Held       bool
	HoldMicros int64
	// Outcome is the decision known at the reply: OutcomeCommit, OutcomeRelease,
	// OutcomeError, or "" (none yet, or none needed: an unbilled answer).
	Outcome string
	// ChargeMicros is what the decided commit charges: the price of its usage, capped at
	// the hold as accounting caps it; 0 on a release.
	ChargeMicros int64
	// Usage is true when the commit charges tokens: InputTokens and OutputTokens are
	// those it charges (the upstream's usage, or what a broken stream delivered).
	Usage                     bool
	InputTokens, OutputTokens int64
	// Error is the API error code extproc answered with, "" when none.
	Error apierr.Code
}

// The outcomes a reply can carry.
const (
	// OutcomeCommit: the hold is committed for ChargeMicros, after the reply.
	OutcomeCommit = "commit"
	// OutcomeRelease: the hold is released, after the reply; nothing is charged.
	OutcomeRelease = "release"
	// OutcomeError: extproc answered an error and nothing was held.
	OutcomeError = "error"
)

// facts returns the request's current Facts.
func (r *Request) facts() Facts {
	f := Facts{Endpoint: r.endpoint.Path(), Error: r.failed}
	switch {
	case r.model != nil:
		f.Model = r.model.ID
	case r.failed == apierr.ModelNotAvailable:
		// An authenticated request named a well-formed id the catalog does not know.
		f.Model = r.parsed.Model
	}
	if r.channel != nil {
		f.Channel = r.channel.Name
	}
	if r.reservation != nil {
		f.Held, f.HoldMicros = true, r.reservation.Amount
	}
	switch v := &r.settlement; {
	case v.Outcome != "":
		f.Outcome = v.Outcome
		if v.Outcome == OutcomeCommit {
			// Accounting charges the hold at most (Capped).
			f.ChargeMicros = min(v.ActualMicros, r.reservation.Amount)
			if v.Usage.Units == nil {
				f.Usage, f.InputTokens, f.OutputTokens = true, v.Usage.InputTokens, v.Usage.OutputTokens
			}
		}
	case f.Error != "" && !f.Held:
		f.Outcome = OutcomeError
	}
	return f
}

// withFacts puts the request's Facts on a when they changed since the last reply.
func (r *Request) withFacts(a Action) Action {
	if f := r.facts(); f != r.reported {
		a.Facts, a.FactsSent = &f, r.reported
		r.reported = f
	}
	return a
}
