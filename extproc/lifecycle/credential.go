package lifecycle

// The channel's credential on the request that goes upstream (package credential),
// computed after the last rewrite, over the exact path and body bytes sent.

import (
	"context"
	"time"

	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/credential"
	"go.uber.org/zap"
)

// credentialTimeout bounds a credential that must reach a token endpoint (a service
// account without a cached token).
const credentialTimeout = 10 * time.Second

// credentialHeaders is ch's credential headers for the request as sent. A credential that
// cannot be had (a token endpoint that refuses or does not answer) is logged and the
// request goes without one: the provider's refusal is then classified like any account
// refusal (the channel cools; with failover the next channel answers), so no second
// failure path exists. The error never carries a secret (package credential).
func (r *Request) credentialHeaders(ch *catalog.Channel, method, host, path string, body []byte) []Header {
	ctx, cancel := context.WithTimeout(context.Background(), credentialTimeout)
	defer cancel()
	hs, err := ch.Credential().Headers(ctx, credential.Request{Method: method, Host: host, Path: path, Body: body})
	if err != nil {
		r.log().Warn("channel credential unavailable: the request goes without it",
			zap.String("channel", ch.Name), zap.Error(err))
		return nil
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header(h)
	}
	return out
}

// upstreamHost is the host header ch's upstream receives when the request is routed to
// ch's own cluster: Envoy's router rewrites it to the endpoint's hostname under the
// route's auto_host_rewrite (envoy/envoy.yaml), and only a DNS cluster's endpoint has
// one (Envoy's source/common/router/upstream_request.cc, UpstreamRequest::onPoolReady:
// autoHostRewrite() with a non-empty host->hostname()); an IP cluster keeps the
// client's :authority.
func (r *Request) upstreamHost(ch *catalog.Channel) string {
	if cl := r.cat.Cluster(ch.Cluster); cl != nil && cl.IsDNS() {
		return cl.Host()
	}
	return r.authority
}
