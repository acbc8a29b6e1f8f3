package front

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// proxy is the router: it sends the request to a host of the routed cluster, retries as
// the route's retry policy says, and sends the final answer downstream.
func (x *exchange) proxy(body io.Reader) {
	rc := x.route
	if rc.route == nil {
		x.routerLocalReply(http.StatusNotFound, "", detailsRoutNotFound)
		return
	}
	up := x.f.clusters.get(rc.cluster)
	if up == nil {
		x.routerLocalReply(rc.route.ClusterNotFoundStatus, "", detailsClusterNotFound)
		return
	}
	// The first host is chosen before the retry state exists (router.cc
	// Filter::decodeHeaders, then continueDecodeHeaders).
	host := up.lb.choose(nil)
	if host == nil {
		x.routerLocalReply(http.StatusServiceUnavailable, "no healthy upstream", detailsNoHealthyUpstream)
		return
	}
	rs, refused := newRetryState(rc.route.Retry, &x.reqH, x.f.random)
	if refused != "" {
		x.f.logf("envoyfront: %s is not emulated", refused)
		x.directLocalReply(http.StatusInternalServerError, "", detailsUnsupportedRetry, nil)
		return
	}
	defer rs.release()

	idle := rc.route.IdleTimeout
	if idle == 0 {
		idle = x.f.cfg.StreamIdleTimeout
	}
	upCtx, upCancel := context.WithCancel(x.ctx)
	defer upCancel()
	x.upCancel = upCancel
	var idleFired atomic.Bool
	var watchdog *time.Timer
	if idle > 0 {
		watchdog = time.AfterFunc(idle, func() { idleFired.Store(true); upCancel() })
		defer watchdog.Stop()
	}
	// gone reports (and answers) the end of the exchange by the client or the idle timer.
	gone := func() bool {
		switch {
		case x.ctx.Err() != nil:
			x.finish()
		case idleFired.Load():
			x.routerLocalReply(http.StatusGatewayTimeout, "stream timeout", detailsStreamIdleTimeout)
		default:
			return false
		}
		return true
	}

	var replay *replayBody
	if rs != nil && body != nil {
		replay = newReplayBody(body, x.f.cfg.BufferLimit)
	}
	for {
		if rs != nil {
			rs.onHostAttempted(host)
		}
		attemptBody := body
		if replay != nil {
			attemptBody = replay.reader()
		}
		resp, reset, release, answered := x.attempt(upCtx, up, host, attemptBody)
		if answered {
			// A local reply of the upstream filters went downstream: never retried
			// (router.proto, upstream_http_filters; UpstreamFilterManager::sendLocalReply).
			release()
			rs.release()
			return
		}
		if replay != nil && replay.overflowed() {
			// Past the buffer limit the router drops its retry state (Filter::decodeData).
			rs.release()
			rs, replay = nil, nil
		}
		var status retryStatus
		var wait time.Duration
		var respH headerList // the response headers, as the router and filters see them
		if resp != nil {
			respH = fromHTTP(resp.Header)
		}
		switch {
		case resp == nil && (x.ctx.Err() != nil || idleFired.Load()):
			release()
			gone()
			return
		case resp == nil && rs != nil:
			status, wait = rs.shouldRetry(rs.wouldRetryFromReset(reset), up)
		case resp != nil && rs != nil:
			status, wait = rs.shouldRetry(rs.wouldRetryFromStatus(resp.StatusCode, respH), up)
		}
		if status != retryYes {
			// The last attempt's answer goes downstream; the retry state is dropped
			// (Filter::onUpstreamHeaders), so nothing retries once headers went out.
			rs.release()
			if resp == nil {
				release()
				x.resetLocalReply(reset)
				return
			}
			defer release()
			x.respond(resp, respH, watchdog, idle)
			return
		}
		// Retry: the attempt's stream is reset and its answer discarded
		// (UpstreamRequest::resetStream); the next attempt starts after the back-off
		// (RetryStateImpl::enableBackoffTimer, then Filter::doRetry).
		if resp != nil {
			_ = resp.Body.Close()
		}
		release()
		if !x.f.backoff(upCtx, wait) {
			gone()
			return
		}
		if host = up.lb.choose(rs); host == nil {
			x.routerLocalReply(http.StatusServiceUnavailable, "no healthy upstream", detailsNoHealthyUpstream)
			return
		}
	}
}

// attempt sends the request once to host. It returns the response, or nil and why
// the stream was reset; release ends the attempt (its circuit-breaker slot and stream).
// answered: the attempt's upstream filters sent a local reply downstream; the router
// is done.
func (x *exchange) attempt(ctx context.Context, up *upstream, host *Host, body io.Reader) (resp *http.Response, reset resetReason, release func(), answered bool) {
	if !up.acquire() {
		return nil, resetOverflow, func() {}, false
	}
	actx, cancel := context.WithCancel(ctx)
	release = func() { cancel(); up.release() }
	if up.cfg.Attempt != nil {
		return x.filteredAttempt(actx, up, host, body, release)
	}
	req, err := newUpstreamRequest(actx, up, host, x.routedHeaders(up, host), body)
	if err != nil {
		return nil, resetRemote, release, false
	}
	resp, reset = roundTrip(up, host, req)
	return resp, reset, release, false
}

// routedHeaders is the request as the router sends this attempt upstream: the route's
// request_headers_to_remove gone (RouteEntry::finalizeRequestHeaders, before the
// upstream request exists), :authority rewritten by auto_host_rewrite for a DNS
// cluster.
func (x *exchange) routedHeaders(up *upstream, host *Host) headerList {
	h := make(headerList, 0, len(x.reqH))
	for _, e := range x.reqH {
		if !slices.Contains(x.route.route.RequestHeadersToRemove, e.Key) {
			h = append(h, e)
		}
	}
	if x.route.route.AutoHostRewrite && up.cfg.DNS {
		h.set(":authority", host.Name)
	}
	return h
}

// newUpstreamRequest builds the request h (pseudo-headers included) for host.
func newUpstreamRequest(ctx context.Context, up *upstream, host *Host, h headerList, body io.Reader) (*http.Request, error) {
	scheme := "http"
	if host.TLS != nil {
		scheme = "https"
	}
	method, _ := h.get(":method")
	path, _ := h.get(":path")
	req, err := http.NewRequestWithContext(ctx, method, scheme+"://"+host.Addr+path, body)
	if err != nil {
		return nil, err
	}
	req.Host, _ = h.get(":authority")
	req.ContentLength = 0
	if body != nil {
		req.ContentLength = -1
	}
	for _, e := range h {
		switch {
		case strings.HasPrefix(e.Key, ":"):
		case e.Key == "content-length":
			if n, err := strconv.ParseInt(e.Value, 10, 64); err == nil {
				req.ContentLength = n
			}
		default:
			k := canonicalKey(e.Key) // as Header.Add does, remembered
			req.Header[k] = append(req.Header[k], e.Value)
		}
	}
	if req.ContentLength == 0 {
		req.Body = http.NoBody
	}
	return req, nil
}

// roundTrip sends req on the cluster's connections of host's transport socket: the
// response, or why the stream was reset.
func roundTrip(up *upstream, host *Host, req *http.Request) (*http.Response, resetReason) {
	resp, err := up.transports[host.socket].RoundTrip(req)
	switch {
	case err == nil:
		return resp, 0
	case isConnectError(err):
		return nil, resetConnectionFailure
	}
	return nil, resetRemote
}

// resetLocalReply is the router's local reply for an attempt reset before any
// response (Filter::onUpstreamReset with no retry left).
func (x *exchange) resetLocalReply(r resetReason) {
	switch r {
	case resetOverflow:
		x.routerLocalReply(http.StatusServiceUnavailable,
			"upstream connect error or disconnect/reset before headers. reset reason: overflow",
			detailsOverflow)
	case resetConnectionFailure:
		x.routerLocalReply(http.StatusServiceUnavailable,
			"upstream connect error or disconnect/reset before headers. reset reason: remote connection failure",
			detailsConnectFailure)
	default:
		x.routerLocalReply(http.StatusServiceUnavailable,
			"upstream connect error or disconnect/reset before headers. reset reason: remote reset",
			detailsUpstreamReset)
	}
}

// respond sends an upstream response downstream through ext_proc's encoder side;
// respH is fromHTTP(resp.Header).
func (x *exchange) respond(resp *http.Response, respH headerList, watchdog *time.Timer, idle time.Duration) {
	defer resp.Body.Close()
	h := make(headerList, 1, 2+len(respH))
	h[0] = header{":status", strconv.Itoa(resp.StatusCode)}
	h = append(h, respH...)
	if _, ok := h.get("content-length"); !ok && resp.ContentLength >= 0 {
		h.add("content-length", strconv.FormatInt(resp.ContentLength, 10))
	}
	var rd io.Reader = resp.Body
	if watchdog != nil {
		watchdog.Reset(idle)
		rd = &idleReader{r: resp.Body, t: watchdog, d: idle}
	}
	x.encode(h, rd, resp.ContentLength == 0)
}

// backoff waits d before a retry; false when ctx ended first.
func (f *Front) backoff(ctx context.Context, d time.Duration) bool {
	if f.onBackoff != nil {
		f.onBackoff(d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
