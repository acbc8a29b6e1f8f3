package front

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Retry headers the router consumes whether or not it retries, so none reaches the
// upstream (RetryStateImpl::create, source/common/router/retry_state_impl.cc).
var consumedRetryHeaders = [...]string{
	"x-envoy-retry-on", "x-envoy-retry-grpc-on", "x-envoy-max-retries",
	"x-envoy-hedge-on-per-try-timeout", "x-envoy-retriable-header-names",
	"x-envoy-retriable-status-codes", "x-envoy-upstream-rq-per-try-timeout-ms",
}

// unemulatedRetryHeaders are consumed retry headers whose effect the front does not
// emulate: a request carrying one is refused.
var unemulatedRetryHeaders = []string{
	"x-envoy-retry-grpc-on", "x-envoy-hedge-on-per-try-timeout",
	"x-envoy-retriable-header-names", "x-envoy-upstream-rq-per-try-timeout-ms",
}

// Envoy's retry back-off defaults: base interval 25 ms (runtime
// upstream.base_retry_backoff_ms), maximum ten times the base (RetryStateImpl's
// constructor; retry_back_off is not emulated).
const (
	retryBaseInterval = 25 * time.Millisecond
	retryMaxInterval  = 10 * retryBaseInterval
)

// retryStatus is RetryStatus.
type retryStatus int

const (
	retryNo retryStatus = iota
	retryYes
	retryNoLimitExceeded
	retryNoOverflow
)

// resetReason is the part of Http::StreamResetReason the front tells apart.
type resetReason int

const (
	resetConnectionFailure resetReason = iota
	resetRemote
	resetOverflow
)

// retryState is one request's RetryStateImpl, with its retry priority
// (previous_priorities) and host predicate (previous_hosts). It is also the router's
// LoadBalancerContext for the request's attempts (router.h, Filter).
type retryState struct {
	on        retryOn
	remaining uint32
	codes     []uint32
	// isRetry: the next host choice is for a retry (Filter::is_retry_).
	isRetry bool
	// selection is host_selection_retry_max_attempts.
	selection uint32
	// prevHosts is nil without previous_hosts, else the hosts attempted.
	prevHosts *[]*Host
	prio      *previousPriorities
	// back is the wait between retries (RetryStateImpl's backoff_strategy_).
	back   jitteredBackoff
	random func() uint64
	// holdsRetry: a retry is outstanding and holds one of the cluster's max_retries
	// circuit-breaker slots (from shouldRetry until the next decision or the end).
	holdsRetry *upstream
}

// newRetryState is RetryStateImpl::create and its constructor: it consumes the retry
// headers from h, and returns nil when nothing can retry (no retry_on in the route or
// the headers). refused names a header or condition the front does not emulate.
func newRetryState(p *RetryPolicy, h *headerList, random func() uint64) (rs *retryState, refused string) {
	var values [len(consumedRetryHeaders)]string
	var present [len(consumedRetryHeaders)]bool
	for i, k := range consumedRetryHeaders {
		if v, ok := h.get(k); ok {
			values[i], present[i] = v, true
			h.del(k)
		}
	}
	header := func(k string) (string, bool) {
		i := slices.Index(consumedRetryHeaders[:], k)
		return values[i], present[i]
	}
	for _, k := range unemulatedRetryHeaders {
		if _, ok := header(k); ok {
			return nil, k
		}
	}
	if p == nil {
		// A route without retry_policy: Envoy's default policy retries once when a header
		// asks for retries (router filter docs, x-envoy-max-retries).
		p = &RetryPolicy{NumRetries: 1, HostSelectionAttempts: 1}
	}
	if _, ok := header("x-envoy-retry-on"); !ok && p.On == 0 {
		return nil, ""
	}
	rs = &retryState{on: p.On, remaining: p.NumRetries, codes: slices.Clone(p.RetriableStatusCodes),
		selection: p.HostSelectionAttempts, back: newJitteredBackoff(retryBaseInterval, retryMaxInterval), random: random}
	if p.PreviousHosts {
		rs.prevHosts = new([]*Host)
	}
	if p.PreviousPriorities > 0 {
		rs.prio = &previousPriorities{frequency: int(p.PreviousPriorities)}
	}
	if v, ok := header("x-envoy-retry-on"); ok {
		on, bad := parseRetryOn(v)
		if len(bad) > 0 {
			return nil, "x-envoy-retry-on " + strings.Join(bad, ",")
		}
		rs.on |= on
	}
	// "The max retries header takes precedence if set", only when something can retry;
	// a value that is not a number is ignored (absl::SimpleAtoi).
	if v, ok := header("x-envoy-max-retries"); ok && rs.on != 0 {
		if n, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(v), "+"), 10, 64); err == nil {
			rs.remaining = uint32(n)
		}
	}
	if v, ok := header("x-envoy-retriable-status-codes"); ok {
		for _, c := range strings.Split(v, ",") {
			if n, err := strconv.ParseUint(strings.TrimSpace(c), 10, 32); err == nil {
				rs.codes = append(rs.codes, uint32(n))
			}
		}
	}
	return rs, ""
}

// wouldRetryFromStatus is RetryStateImpl::wouldRetryFromHeaders for the emulated
// conditions: a response of Envoy's own rate limiter (x-envoy-ratelimited) is never
// retried without envoy-ratelimited; retriable-status-codes matches the status.
func (rs *retryState) wouldRetryFromStatus(status int, h headerList) bool {
	if _, ok := h.get("x-envoy-ratelimited"); ok {
		return false
	}
	return rs.on&retryOnRetriableStatusCodes != 0 && slices.Contains(rs.codes, uint32(status))
}

// wouldRetryFromReset is RetryStateImpl::wouldRetryFromReset: never on overflow; reset
// retries any other reset; connect-failure a connection failure.
func (rs *retryState) wouldRetryFromReset(r resetReason) bool {
	switch {
	case r == resetOverflow:
		return false
	case rs.on&retryOnReset != 0:
		return true
	}
	return rs.on&retryOnConnectFailure != 0 && r == resetConnectionFailure
}

// shouldRetry is RetryStateImpl::shouldRetry: an outstanding retry ends (its
// circuit-breaker slot is freed); then no retry is wanted, or none is left (the count
// is spent even if the cluster's max_retries breaker then refuses), or a retry is
// scheduled after the returned back-off.
func (rs *retryState) shouldRetry(would bool, up *upstream) (retryStatus, time.Duration) {
	rs.release()
	if !would {
		return retryNo, 0
	}
	if rs.remaining == 0 {
		return retryNoLimitExceeded, 0
	}
	rs.remaining--
	if !up.acquireRetry() {
		return retryNoOverflow, 0
	}
	rs.holdsRetry = up
	rs.isRetry = true
	return retryYes, rs.backoff()
}

// backoff is the wait before the next retry.
func (rs *retryState) backoff() time.Duration { return rs.back.wait(rs.random()) }

// release is RetryStateImpl::resetRetry.
func (rs *retryState) release() {
	if rs != nil && rs.holdsRetry != nil {
		rs.holdsRetry.releaseRetry()
		rs.holdsRetry = nil
	}
}

// onHostAttempted is RetryStateImpl::onHostAttempted: the host predicates and the retry
// priority learn the host (Filter::onUpstreamHostSelected, on pool success or failure).
func (rs *retryState) onHostAttempted(h *Host) {
	if rs.prevHosts != nil {
		*rs.prevHosts = append(*rs.prevHosts, h)
	}
	if rs.prio != nil {
		rs.prio.attempted = append(rs.prio.attempted, h)
	}
}

// priorityLoad is Filter::determinePriorityLoad: the retry priority's load on a retry.
func (rs *retryState) priorityLoad(b *balancer, original []uint32) []uint32 {
	if !rs.isRetry || rs.prio == nil {
		return original
	}
	return rs.prio.determine(b, original)
}

// selectAnother is Filter::shouldSelectAnotherHost: on a retry, previous_hosts rejects
// a host already attempted. PreviousHostsRetryPredicate compares the hosts themselves
// (pointers to HostDescription: source/extensions/retry/host/previous_hosts/
// previous_hosts.h), not addresses, so two endpoints with one address (two channels on
// one provider host, in different priorities) are different hosts.
func (rs *retryState) selectAnother(h *Host) bool {
	return rs.isRetry && rs.prevHosts != nil && slices.Contains(*rs.prevHosts, h)
}

// selectionRetries is Filter::hostSelectionRetryCount: 1 on a first attempt, the
// policy's host_selection_retry_max_attempts on a retry.
func (rs *retryState) selectionRetries() int {
	if !rs.isRetry {
		return 1
	}
	return int(rs.selection)
}
