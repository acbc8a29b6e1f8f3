package lifecycle

import (
	"strconv"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/health"
	"github.com/llmgw/gateway/extproc/response"
	"github.com/llmgw/gateway/extproc/translate"
	"go.uber.org/zap"
)

// AttemptOutcome is how one attempt of a failover request ended.
type AttemptOutcome uint8

const (
	// AttemptPending: no answer yet.
	AttemptPending AttemptOutcome = iota
	// AttemptAnswered: a success went on to the request's response phases.
	AttemptAnswered
	// AttemptPassed: an error that is the request's own (a 4xx other than the account's)
	// went on unchanged: another channel would refuse it too.
	AttemptPassed
	// AttemptAccount: the provider refused the gateway's account (out of funds,
	// unauthorized), in whatever status and body it uses.
	AttemptAccount
	// AttemptUnreachable: no answer at all (connect failure, reset, timeout).
	AttemptUnreachable
	// AttemptFailed: a 5xx, a 429 or another unusable error answer.
	AttemptFailed
	// AttemptNoCredential: the channel's credential could not be had; nothing was sent
	// and the attempt was refused (StartAttempt).
	AttemptNoCredential
)

func (o AttemptOutcome) String() string {
	return [...]string{"pending", "answered", "passed", "account", "unreachable", "failed", "no_credential"}[o]
}

// failed reports whether the outcome made the router try the next channel, or ended
// the attempt as failed.
func (o AttemptOutcome) failed() bool {
	return o == AttemptAccount || o == AttemptUnreachable || o == AttemptFailed || o == AttemptNoCredential
}

// AttemptFailureHeader marks a failed attempt's answer, turned into RetryStatus for the
// router: its value is the outcome. Only the request's own response phases see it (they
// replace every error whole).
const AttemptFailureHeader = "x-llmgw-attempt-failure"

// RetryStatus is the status a failed attempt's answer is given: the route's
// retriable_status_codes.
const RetryStatus = 503

// Attempt is one try of a failover request on one channel: one stream of the failover
// cluster's upstream ext_proc. Not safe for concurrent use (its stream's goroutine).
type Attempt struct {
	r     *Request
	ch    *catalog.Channel
	xlate *translate.Translator
	// got is the answer's status, as the attempt's stream saw it; errType its
	// response.ErrorTypeHeader.
	got     int
	errType string
	// outcome and status are the record, written under the request's failover lock.
	outcome AttemptOutcome
	status  int
}

// attemptRefused answers an attempt extproc cannot make: Envoy sends the local reply
// downstream (no retry), where the request's own stream replaces it with its envelope.
func attemptRefused(why string) Action {
	return Action{Immediate: &Immediate{Status: 502, Details: "extproc_attempt_refused_" + why}}
}

// StartAttempt begins the attempt of request requestID (Envoy's x-request-id) on channel
// (the endpoint Envoy picked, from its metadata) and returns the request as the channel
// must receive it: its path, credential, API headers and body (a whole-message
// replacement). The attempt is nil when the request or the channel is unknown, or the
// channel was attempted before in this request.
func (s *Service) StartAttempt(requestID, channel string) (*Attempt, Action) {
	// The request registered the id as it keeps it (requestHeaders).
	v, ok := s.attempting.Load(truncate(requestID, MaxLoggedRequestID))
	if !ok {
		return nil, attemptRefused("unknown_request")
	}
	r := v.(*Request)
	a, rw, refused := s.claimAttempt(r, channel)
	if a == nil {
		return nil, refused
	}
	if rw.signed {
		return a, rw.act
	}
	// A channel that was cooling when the request was routed, which Envoy picked from an
	// older view: its credential now, outside the request's lock (it may wait on a token
	// endpoint). Without one nothing is sent: Envoy answers the refusal downstream (its
	// upstream filters' local replies are never retried), where the request's own stream
	// replaces it with its envelope and releases the hold.
	if !rw.noCredential {
		act, err := rw.sign(r, a.ch, r.authority)
		if err == nil {
			return a, act
		}
	}
	a.settle(AttemptNoCredential)
	r.log().Warn("attempt refused: its channel has no credential, nothing was sent", zap.String("channel", a.ch.Name))
	return nil, attemptRefused("no_credential")
}

// claimAttempt records the attempt of r on channel and returns it with the channel's
// rewrite, or the refusal when the attempt cannot be made.
func (s *Service) claimAttempt(r *Request, channel string) (*Attempt, rewrite, Action) {
	fo := r.fo
	fo.mu.Lock()
	defer fo.mu.Unlock()
	var ch *catalog.Channel
	for _, c := range fo.set {
		if c.Name == channel {
			ch = c
		}
	}
	rw, ok := fo.rewrites[ch]
	if !ok {
		// An unknown channel, or any attempt once an answer went on.
		return nil, rewrite{}, attemptRefused("unknown_channel")
	}
	for _, a := range fo.attempts {
		if a.ch == ch {
			return nil, rewrite{}, attemptRefused("channel_attempted")
		}
	}
	// Envoy skips the channels this replica's health marks unhealthy; one it picks anyway
	// (its view was older) is tried: health is advice, never a refusal.
	_, _ = s.cfg.Health.Acquire(ch.Name)
	a := &Attempt{r: r, ch: ch, xlate: rw.xlate}
	fo.attempts = append(fo.attempts, a)
	return a, rw, Action{}
}

// ResponseHeaders handles the attempt's response headers: a success goes on (and this
// attempt's channel and translator become the request's); anything else is classified
// on its body, which is asked for.
func (a *Attempt) ResponseHeaders(status int, headers []Header, endOfStream bool) Action {
	a.got = status
	for _, h := range headers {
		if h.Name == response.ErrorTypeHeader {
			a.errType = h.Value
		}
	}
	if status >= 200 && status <= 299 {
		a.settle(AttemptAnswered)
		return Action{}
	}
	if endOfStream {
		return a.classify(nil)
	}
	return Action{ResponseBodyMode: ModeBuffered}
}

// ResponseBody classifies an error answer's whole body.
func (a *Attempt) ResponseBody(body []byte) Action { return a.classify(body) }

// classify decides what the error answer of the attempt is: the account's refusal, a
// failure worth the next channel, or the request's own error (which goes on).
func (a *Attempt) classify(body []byte) Action {
	h := a.r.svc.cfg.Health
	var outcome AttemptOutcome
	switch code := response.ClassifyUpstream(a.r.upstreamFormatOf(a.xlate), a.got, "application/json", a.errType, body); {
	case code == apierr.UpstreamAccountUnavailable || response.AccountRefusal(body):
		outcome = AttemptAccount
		h.Failed(a.ch.Name, health.Account)
	case a.got == 429:
		outcome = AttemptFailed
		h.Failed(a.ch.Name, health.RateLimited)
	case a.got >= 500 || code == apierr.ServiceUnavailable:
		outcome = AttemptFailed
		h.Failed(a.ch.Name, health.ServerError)
	default:
		a.settle(AttemptPassed)
		return Action{}
	}
	a.settle(outcome)
	a.r.log().Warn("attempt failed: the router tries the next channel", zap.String("channel", a.ch.Name),
		zap.Int("status", a.got), zap.Stringer("outcome", outcome))
	return Action{SetHeaders: []Header{{":status", strconv.Itoa(RetryStatus)}, {AttemptFailureHeader, outcome.String()}}}
}

// End is the end of the attempt's stream: an attempt that got no answer could not reach
// its channel (Envoy closes the stream when the connection fails or resets).
func (a *Attempt) End() {
	if a.got != 0 {
		return
	}
	a.r.svc.cfg.Health.Failed(a.ch.Name, health.Transport)
	a.settle(AttemptUnreachable)
	a.r.log().Warn("attempt got no answer: the router tries the next channel", zap.String("channel", a.ch.Name))
}

// settle records the attempt's outcome; an answer that goes on makes it the winner.
func (a *Attempt) settle(o AttemptOutcome) {
	fo := a.r.fo
	fo.mu.Lock()
	defer fo.mu.Unlock()
	a.outcome, a.status = o, a.got
	if o == AttemptAnswered || o == AttemptPassed {
		fo.winner = a
		fo.rewrites = nil // no attempt follows an answer that went on
	}
}
