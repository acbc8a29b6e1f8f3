package lifecycle

// The one record of a request: what its replies told (Facts, Reply) and its settlement
// as it landed, handed to the Service's observers once, when the request is over.

import (
	"errors"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
)

// Observer hears what becomes of requests: each hold when it is made, and each
// request's Record once, when it is over. Its methods run on a request's goroutine or
// on a settlement's, so they must be cheap and safe for concurrent use.
type Observer interface {
	// Held hears a reservation accounting granted, once, when it was made: the
	// request's hold, or the hold a reservation abandoned past the admission budget
	// made after all. Its Record follows, with Settlement.Reservation its id.
	Held(ledger.Reservation)
	// Observe hears the request's Record, once.
	Observe(Record)
}

// Record is the one record of a request, handed over when the request is over: its
// stream ended (End) and its settlement, if any, has landed (or failed for good).
type Record struct {
	// Facts are the request's facts at its end: those of its last reply, and the
	// settlement End decided after it.
	Facts
	// RequestID is Envoy's x-request-id (bounded: MaxLoggedRequestID).
	RequestID string
	// Account and KeyID are who was billed, "" before the key was accepted.
	Account, KeyID string
	// Tier is the account's tier (its limits and routing), "" before the key was
	// accepted.
	Tier string
	// AskedModel is the model id the body named: the client's text, possibly not in the
	// catalog ("" when no body was parsed). Facts.Model is the catalog id it resolved to.
	AskedModel string
	// UpstreamModel is the channel's model id, "" before a channel was picked.
	UpstreamModel string
	// Operation is the endpoint's gen_ai.operation.name ("chat", "embeddings", ...);
	// Provider the channel's gen_ai.provider.name ("" before a channel was picked);
	// ResponseModel the model id the provider's answer named ("" when none was read).
	Operation, Provider, ResponseModel string
	// Stream: the client asked for an event stream (SSE) answer.
	Stream bool
	// Timing is when the request and its answer's body went by.
	Timing Timing
	// Attempts are a failover request's attempts, in order (none without failover).
	Attempts []AttemptSummary
	// Reply is how the client was answered.
	Reply Reply
	// Settlement is the hold's settlement as it landed; the zero Settlement when
	// nothing was held.
	Settlement Settlement
}

// Timing is when a request went by, on the wall clock: the zero time for what did
// not happen.
type Timing struct {
	// Start is when Envoy opened the request's stream; End when it ended (End).
	Start, End time.Time
	// FirstChunk is when the first bytes of a usable answer's body arrived (the
	// rewriter took the answer); LastChunk when its last chunk (end of stream) did.
	FirstChunk, LastChunk time.Time
}

// timeChunk notes when a response body chunk of n bytes arrived.
func (r *Request) timeChunk(n int, endOfStream bool) {
	if r.resp == nil || r.resp.rw == nil || n == 0 && (!endOfStream || r.timing.FirstChunk.IsZero()) {
		return
	}
	now := time.Now()
	if r.timing.FirstChunk.IsZero() {
		r.timing.FirstChunk = now
	}
	if endOfStream {
		r.timing.LastChunk = now
	}
}

// Reply is how a request was answered, as its replies told Envoy.
type Reply struct {
	// Code is the API error code of the first error extproc answered (an immediate
	// response of status 400 or more), "" when it answered none.
	Code apierr.Code
	// CodeOnResponse: Code answered the upstream's response (a response phase), not the
	// client's request.
	CodeOnResponse bool
	// Answered: the client got an answer, an immediate response or the upstream's
	// response headers.
	Answered bool
	// UpstreamStatus is the :status of the response headers (the upstream's, or Envoy's
	// own local reply), 0 when none came.
	UpstreamStatus int
	// Streamed: the response body was switched to STREAMED; Complete: its last chunk
	// (end of stream) arrived.
	Streamed, Complete bool
}

// Settlement is a hold's settlement: decided on the request's goroutine, then run
// against the ledger in the background (hold.go) until it lands or fails for good.
type Settlement struct {
	// Reservation is the hold's id and HoldMicros its amount; "" when nothing was held.
	Reservation string
	HoldMicros  int64
	// Outcome is OutcomeCommit or OutcomeRelease; "" when the hold was given up without
	// a settlement (Err says why).
	Outcome string
	// Reason is why the hold was released.
	Reason string
	// ActualMicros is the price of Usage (a commit); ChargedMicros what accounting
	// charged, at most the hold (Capped when the price exceeded it). Replayed: accounting
	// had this commit already (a retry after a lost answer) and answered its result.
	ActualMicros, ChargedMicros int64
	Capped, Replayed            bool
	// Usage is what a commit charges: tokens with their rate-card components and tier,
	// or units.
	Usage ledger.Usage
	// Err is why the settlement did not land: accounting refused it for good (the hold
	// had expired), or none was made. Either way nothing was charged, and accounting
	// frees the hold.
	Err error
}

// Landed reports whether the settlement landed.
func (s *Settlement) Landed() bool { return s.Outcome != "" && s.Err == nil }

// ErrUnsettled is a Settlement's Err when the hold was given up without a settlement
// (the request's end failed before it settled): its lease frees it.
var ErrUnsettled = errors.New("hold given up without a settlement")

// landed is what the ledger answered a settlement, written by its background call.
type landed struct {
	charged          int64
	capped, replayed bool
	err              error
}

// startPart opens a part of the request that must end before its record is handed
// over (a background ledger call); endPart ends one (End ends the stream's).
func (r *Request) startPart() { r.open.Add(1) }

// endPart ends a part of the request; the last hands the record to the observers. The
// atomic count orders every write of the parts before the record is read.
func (r *Request) endPart() {
	if r.open.Add(-1) != 0 {
		return
	}
	rec := r.record()
	for _, o := range r.svc.observers {
		o.Observe(rec)
	}
}

// record builds the request's Record once it is over.
func (r *Request) record() Record {
	rec := Record{
		Facts:      r.facts(),
		RequestID:  r.requestID,
		Account:    r.grant.AccountID,
		KeyID:      r.grant.KeyID,
		Tier:       r.grant.Tier,
		AskedModel: r.parsed.Model,
		Attempts:   r.Attempts(),
		Reply:      r.reply,
		Operation:  operationName(r.endpoint),
		Timing:     r.timing,
		Stream:     r.parsed.Stream,
	}
	if r.channel != nil {
		rec.UpstreamModel, rec.Provider = r.channel.UpstreamModel, providerName(r.channel)
	}
	if st := r.resp; st != nil && st.rw != nil {
		rec.ResponseModel = st.rw.UpstreamModel()
	}
	switch {
	case r.abandoned != nil:
		rec.Settlement = *r.abandoned
	case r.reservation != nil:
		s := r.settlement
		s.Reservation, s.HoldMicros = r.reservation.ID, r.reservation.Amount
		if !r.settled {
			s.Err = ErrUnsettled
		}
		s.ChargedMicros, s.Capped, s.Replayed = r.landed.charged, r.landed.capped, r.landed.replayed
		if r.landed.err != nil {
			s.Err = r.landed.err
		}
		rec.Settlement = s
	}
	return rec
}

// replied notes what a phase's reply tells the client: onResponse is true in the
// response phases.
func (r *Request) replied(a Action, onResponse bool) {
	im := a.Immediate
	if im == nil {
		return
	}
	r.reply.Answered = true
	if im.Status >= 400 && r.reply.Code == "" {
		r.reply.Code, r.reply.CodeOnResponse = r.failed, onResponse
	}
}
