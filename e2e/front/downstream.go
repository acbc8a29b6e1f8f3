package front

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// What the connection manager does to request headers before any filter sees them
// (Envoy's ConnectionManagerUtility::mutateRequestHeaders, 1.37): find the client
// address, extend x-forwarded-for, decide whether the request is internal, and clean an
// external request of the x-envoy-* instructions only internal callers may give.

// externalCleaned are the headers the connection manager removes from every external
// request: the router would otherwise act on them (retries, timeouts, hedging).
var externalCleaned = []string{
	"x-envoy-retriable-status-codes", "x-envoy-retriable-header-names", "x-envoy-retry-on",
	"x-envoy-retry-grpc-on", "x-envoy-max-retries", "x-envoy-upstream-alt-stat-name",
	"x-envoy-upstream-rq-timeout-ms", "x-envoy-upstream-rq-per-try-timeout-ms",
	"x-envoy-upstream-rq-timeout-alt-response", "x-envoy-expected-rq-timeout-ms",
	"x-envoy-force-trace", "x-envoy-ip-tags", "x-envoy-original-url",
	"x-envoy-hedge-on-per-try-timeout",
}

// edgeCleaned are removed too when the request is an edge request (external, with
// use_remote_address).
var edgeCleaned = []string{
	"x-envoy-decorator-operation", "x-envoy-downstream-service-cluster", "x-envoy-downstream-service-node",
}

// Headers the connection manager sets.
const (
	hdrXFF             = "x-forwarded-for"
	hdrXFP             = "x-forwarded-proto"
	hdrInternal        = "x-envoy-internal"
	hdrExternalAddress = "x-envoy-external-address"
	hdrRequestID       = "x-request-id"
)

// nodeAddress is the address Envoy appends to x-forwarded-for for a loopback peer: the
// server's local address, the first non-loopback IPv4 address of the host's
// interfaces (127.0.0.1 when there is none).
func nodeAddress() netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if ip = ip.Unmap(); ok && ip.Is4() && !ip.IsLoopback() {
				return ip
			}
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// lastXFFAddress reads the address skip entries before the end of x-forwarded-for;
// single reports that it was the only entry (and skip was 0). ok is false when the
// header is absent, too short, or the entry is not an IP address.
func lastXFFAddress(h headerList, skip int) (addr netip.Addr, ok, single bool) {
	v, present := h.get(hdrXFF)
	if !present {
		return netip.Addr{}, false, false
	}
	for range skip {
		i := strings.LastIndex(v, ",")
		if i < 0 {
			return netip.Addr{}, false, false
		}
		v = v[:i]
	}
	i := strings.LastIndex(v, ",")
	last := v
	if i >= 0 && i+1 < len(v) {
		last = v[i+1:]
	}
	a, err := netip.ParseAddr(strings.TrimSpace(last))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false, false
	}
	return a, true, i < 0 && skip == 0
}

// isInternal reports whether internal_address_config makes a an internal address.
func (c *Config) isInternal(a netip.Addr) bool {
	for _, p := range c.InternalRanges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// sanitize applies the connection manager's request header handling to h for a
// request from peer (invalid when unknown).
func (f *Front) sanitize(h *headerList, peer netip.Addr) {
	c := f.cfg
	h.del(hdrInternal)
	// Repeated x-forwarded-for lines are one comma-separated list in Envoy's header map.
	if vs := h.values(hdrXFF); len(vs) > 1 {
		h.set(hdrXFF, strings.Join(vs, ","))
	}

	var final netip.Addr
	trusted := false // the address may make the request internal
	if c.UseRemoteAddress {
		_, hasXFF := h.get(hdrXFF)
		trusted = !hasXFF
		if c.XffNumTrustedHops > 0 {
			if a, ok, _ := lastXFFAddress(*h, c.XffNumTrustedHops-1); ok {
				final = a
			}
		}
		if !final.IsValid() {
			final = peer
		}
		if peer.IsValid() {
			appended := peer
			if peer.IsLoopback() {
				appended = f.node
			}
			if v, ok := h.get(hdrXFF); ok {
				h.set(hdrXFF, v+","+appended.String())
			} else {
				h.add(hdrXFF, appended.String())
			}
		}
		if _, ok := h.get(hdrXFP); c.XffNumTrustedHops == 0 || !ok {
			h.set(hdrXFP, "http")
		}
	} else if a, ok, single := lastXFFAddress(*h, c.XffNumTrustedHops); ok {
		final, trusted = a, single
	}
	if _, ok := h.get(hdrXFP); !ok {
		h.add(hdrXFP, "http")
	}

	internal := trusted && final.IsValid() && c.isInternal(final)
	edge := !internal && c.UseRemoteAddress
	if internal {
		h.set(hdrInternal, "true")
	} else {
		if edge {
			for _, k := range edgeCleaned {
				h.del(k)
			}
		}
		for _, k := range externalCleaned {
			h.del(k)
		}
	}
	if edge && final.IsValid() {
		h.set(hdrExternalAddress, final.String())
	}
	// generate_request_id (default on), preserve_external_request_id (default off):
	// ConnectionManagerUtility::mutateRequestHeaders (source/common/http/
	// conn_manager_utility.cc) calls UUIDRequestIDExtension::set
	// (source/extensions/request_id/uuid/config.cc), which sets a fresh UUID4 on a
	// request without one (or with an empty one) and replaces a client's on an edge
	// request. The client's id is therefore never used or echoed.
	if id, _ := h.get(hdrRequestID); edge || id == "" {
		h.set(hdrRequestID, newRequestID())
	}
}

// peerAddr is the client's address of a downstream request.
func peerAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// rules are the ext_proc filter's mutation rules for a request or response header map.
func (f *Front) rules(response, allowContentLength bool) mutationRules {
	return mutationRules{
		allowRouting: f.cfg.ExtProc.AllowAllRouting, allowEnvoy: f.cfg.ExtProc.AllowEnvoy,
		response: response, allowContentLength: allowContentLength,
	}
}
