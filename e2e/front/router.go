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
		resp, reset, release := x.attempt(upCtx, up, host, attemptBody)
		if replay != nil && replay.overflowed() {
			// Past the buffer limit the router drops its retry state (Filter::decodeData).
			rs.release()
			rs, replay = nil, nil
		}
		var status retryStatus
		var wait time.Duration
		switch {
		case resp == nil && (x.ctx.Err() != nil || idleFired.Load()):
			release()
			gone()
			return
		case resp == nil && rs != nil:
			status, wait = rs.shouldRetry(rs.wouldRetryFromReset(reset), up)
		case resp != nil && rs != nil:
			h := fromHTTP(resp.Header)
			status, wait = rs.shouldRetry(rs.wouldRetryFromStatus(resp.StatusCode, h), up)
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
			x.respond(resp, watchdog, idle)
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
func (x *exchange) attempt(ctx context.Context, up *upstream, host *Host, body io.Reader) (resp *http.Response, reset resetReason, release func()) {
	if !up.acquire() {
		return nil, resetOverflow, func() {}
	}
	actx, cancel := context.WithCancel(ctx)
	release = func() { cancel(); up.release() }
	cl := up.cfg
	scheme := "http"
	if cl.TLS != nil {
		scheme = "https"
	}
	method, _ := x.reqH.get(":method")
	req, err := http.NewRequestWithContext(actx, method, scheme+"://"+host.Addr+x.path(), body)
	if err != nil {
		return nil, resetRemote, release
	}
	req.Host, _ = x.reqH.get(":authority")
	if x.route.route.AutoHostRewrite && cl.DNS {
		req.Host = host.Name
	}
	req.ContentLength = 0
	if body != nil {
		req.ContentLength = -1
	}
	for _, e := range x.reqH {
		switch {
		case strings.HasPrefix(e.Key, ":"), slices.Contains(x.route.route.RequestHeadersToRemove, e.Key):
		case e.Key == "content-length":
			if n, err := strconv.ParseInt(e.Value, 10, 64); err == nil {
				req.ContentLength = n
			}
		default:
			req.Header.Add(e.Key, e.Value)
		}
	}
	if req.ContentLength == 0 {
		req.Body = http.NoBody
	}
	resp, err = up.transport.RoundTrip(req)
	switch {
	case err == nil:
		return resp, 0, release
	case isConnectError(err):
		return nil, resetConnectionFailure, release
	}
	return nil, resetRemote, release
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

// respond sends an upstream response downstream through ext_proc's encoder side.
func (x *exchange) respond(resp *http.Response, watchdog *time.Timer, idle time.Duration) {
	defer resp.Body.Close()
	h := append(headerList{{":status", strconv.Itoa(resp.StatusCode)}}, fromHTTP(resp.Header)...)
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
