package lifecycle

import (
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/credential"
)

// Failover (docs/design/envoy-extproc.md, "Failover across channels"). With Config.Failover, a chat
// request is not rewritten for one channel: it is held once, then routed to its
// failover cluster (catalog.FailoverCluster: its tier's candidate channels as
// endpoints, by priority, cooling ones unhealthy), with x-envoy-max-retries bounding the
// attempts to the candidates. Envoy's router makes the attempts; for
// each, the cluster's upstream ext_proc opens an attempt stream here (attempt.go), which
// rewrites the request for the channel Envoy picked and classifies its answer: a usable
// one goes on to this request's response phases, which translate it back and settle it
// once; a failed one is recorded in the channel's health and handed back to the router
// as a retriable 503. Failed attempts cost nothing: the one hold is committed for the
// answer that went on, or released when none did.

// failoverEligible reports whether the request goes through its failover cluster: a
// chat request whose tier sees two channels or more (extproc/xds serves a failover
// cluster exactly for those), with the x-request-id its attempts are found by.
func (r *Request) failoverEligible(candidates []*catalog.Channel) bool {
	return r.svc.cfg.Failover && r.endpoint.spec().chat != 0 && r.requestID != "" && len(candidates) >= 2
}

// failover is a failover request's shared state: its attempt streams and its own
// stream use it from different goroutines.
type failover struct {
	mu  sync.Mutex
	set []*catalog.Channel // the candidates: the failover cluster's endpoints
	// rewrites are the request as each candidate must receive it, made once when the
	// request was routed (and dropped once an answer went on), with the credential of
	// each candidate this replica's health let the request use (signCandidates); a
	// cooling one costs no token unless Envoy attempts it after all.
	rewrites map[*catalog.Channel]rewrite
	// attempts in the order Envoy made them; winner is the one whose answer went on.
	attempts []*Attempt
	winner   *Attempt
}

// errRewriteTooLarge: the request as a candidate must receive it exceeds Envoy's buffer
// (EnvoyBufferLimit).
var errRewriteTooLarge = errors.New("a channel's request exceeds Envoy's buffer")

// routeFailover admits the request for every candidate at once: the request is rewritten
// for each channel the attempts may reach (a field one of them cannot carry, or a body
// one of them would get over the limit, is refused before anything is held, as for a
// single channel; the attempts take these rewrites as they are), and at least one
// channel must be usable on this replica with its credential (signCandidates).
func (r *Request) routeFailover(body []byte, set []*catalog.Channel) (Action, error) {
	rewrites := make(map[*catalog.Channel]rewrite, len(set))
	for _, ch := range set {
		rw, err := r.rewriteUnsigned(ch, body)
		if err != nil {
			return Action{}, err
		}
		if len(rw.act.Body) > EnvoyBufferLimit {
			return Action{}, errRewriteTooLarge
		}
		rw.act.ReplaceMessage = true
		rewrites[ch] = rw
	}
	if !r.signCandidates(set, rewrites) {
		return Action{}, r.noChannelFor(set)
	}
	r.fo = &failover{set: set, rewrites: rewrites}
	r.svc.attempting.Store(r.requestID, r)
	return Action{
		SetHeaders: []Header{
			{RoutingHeader, catalog.FailoverCluster(r.model, set)},
			// The router's retries, bounded by the candidates (the route's retry_policy
			// says on what; RetryStateImpl reads this header after ext_proc; previous_hosts
			// never picks a channel twice). Not by the channels usable here: the router
			// skips the cooling ones by the health it last got over xDS, which may be a
			// moment older than this replica's, and a channel it picks from the older view
			// must not spend the retry the request's answer needed.
			{"x-envoy-max-retries", strconv.Itoa(len(set) - 1)},
			identityEncoding,
		},
		// The client's credentials go now; each attempt sets its channel's.
		RemoveHeaders:   slices.Clone(credential.HeaderNames),
		ClearRouteCache: true,
	}, nil
}

// signCandidates adds their credential to the rewrites of the candidates this replica's
// health lets the request use, all at once (a credential may wait on a token endpoint),
// and reports whether one of them got it. A channel whose credential cannot be had is
// cooled (credentialHeaders) and its rewrite marked: its attempt sends nothing. Envoy
// learns of the cooldown over xDS at once; an attempt it makes on the channel before
// that is refused (StartAttempt).
func (r *Request) signCandidates(set []*catalog.Channel, rewrites map[*catalog.Channel]rewrite) bool {
	type signed struct {
		ch  *catalog.Channel
		act Action
		err error
	}
	var usable []*catalog.Channel
	for _, ch := range set {
		if r.svc.cfg.Health.Usable(ch.Name) {
			usable = append(usable, ch)
		}
	}
	out := make(chan signed, len(usable))
	for _, ch := range usable {
		go func() {
			// A failover cluster's endpoints carry no hostname: each attempt reaches its
			// upstream with the client's host (credential.go, upstreamHost).
			a, err := rewrites[ch].sign(r, ch, r.authority)
			out <- signed{ch, a, err}
		}()
	}
	ok := false
	for range usable {
		s := <-out
		rw := rewrites[s.ch]
		if s.err != nil {
			rw.noCredential = true
		} else {
			rw.act, rw.signed, ok = s.act, true, true
		}
		rewrites[s.ch] = rw
	}
	return ok
}

// adoptWinner makes the attempt whose answer went on the request's channel (its
// translator included), before the response phases read them. Without one (every
// attempt failed), the channel is the last one attempted, for the error's classification.
func (r *Request) adoptWinner() {
	if r.fo == nil {
		return
	}
	r.fo.mu.Lock()
	defer r.fo.mu.Unlock()
	a := r.fo.winner
	if a == nil && len(r.fo.attempts) > 0 {
		a = r.fo.attempts[len(r.fo.attempts)-1]
	}
	if a != nil {
		r.channel, r.xlate = a.ch, a.xlate
	}
}

// AttemptSummary is one attempt, for the request's Record.
type AttemptSummary struct {
	Channel string
	Outcome AttemptOutcome
	Status  int
}

// Attempts returns the request's attempts, in order (none without failover).
func (r *Request) Attempts() []AttemptSummary {
	if r.fo == nil {
		return nil
	}
	r.fo.mu.Lock()
	defer r.fo.mu.Unlock()
	out := make([]AttemptSummary, len(r.fo.attempts))
	for i, a := range r.fo.attempts {
		out[i] = AttemptSummary{a.ch.Name, a.outcome, a.status}
	}
	return out
}

// failoverCode is the error the client gets when no attempt's answer went on: code (the
// classification of the last answer) unless every attempt failed, then what all of
// them say (failoverVerdict).
func (r *Request) failoverCode(code apierr.Code) apierr.Code {
	if r.fo == nil {
		return code
	}
	r.fo.mu.Lock()
	defer r.fo.mu.Unlock()
	if r.fo.winner != nil || len(r.fo.attempts) == 0 {
		return code
	}
	outcomes := make([]AttemptOutcome, len(r.fo.attempts))
	for i, a := range r.fo.attempts {
		outcomes[i] = a.outcome
	}
	return failoverVerdict(outcomes, code)
}

// failoverVerdict is the answer to a request whose every attempt failed (spec, "no
// eligible healthy channel"): 503 upstream_account_unavailable when every attempted
// account refused, 503 service_unavailable when no channel gave any other answer (none
// could be reached or had its credential, or those reached refused the account), else
// last (the last answer's classification, 502 upstream_error for an unusable one).
func failoverVerdict(outcomes []AttemptOutcome, last apierr.Code) apierr.Code {
	account, reached := true, false
	for _, o := range outcomes {
		switch o {
		case AttemptAccount:
		case AttemptUnreachable, AttemptPending, AttemptNoCredential:
			account = false
		default:
			account, reached = false, true
		}
	}
	switch {
	case len(outcomes) == 0:
		return last
	case account:
		return apierr.UpstreamAccountUnavailable
	case !reached:
		return apierr.ServiceUnavailable
	}
	return last
}

// attemptReported reports whether the request's channel is an attempt that already
// told the channel's health how it failed (its own stream did).
func (r *Request) attemptReported() bool {
	if r.fo == nil {
		return false
	}
	r.fo.mu.Lock()
	defer r.fo.mu.Unlock()
	for _, a := range r.fo.attempts {
		if a.ch == r.channel && a.outcome.failed() {
			return true
		}
	}
	return false
}

// endFailover forgets the request's attempts registration.
func (r *Request) endFailover() {
	if r.fo != nil {
		r.svc.attempting.CompareAndDelete(r.requestID, r)
	}
}

// reachedProvider is what the settlement policy calls "sent": the request went to a
// provider that may bill it. A failover request counts as sent only once an attempt's
// answer went on: failed attempts cost nothing, so a client that leaves between attempts
// (or during one that never answered) releases the hold.
func (r *Request) reachedProvider() bool {
	if r.fo == nil {
		return r.sent
	}
	r.fo.mu.Lock()
	defer r.fo.mu.Unlock()
	return r.sent && r.fo.winner != nil
}
