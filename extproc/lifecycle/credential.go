package lifecycle

// The channel's credential on the request that goes upstream (package credential),
// computed after the last rewrite, over the exact path and body bytes sent.

import (
	"context"
	"errors"
	"time"

	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/extproc/health"
	"go.uber.org/zap"
)

// credentialTimeout bounds a credential that must reach a token endpoint (a service
// account without a cached token).
const credentialTimeout = 10 * time.Second

// errNoCredential: a channel's credential could not be had (a token endpoint that
// refused or did not answer). The channel is not eligible: it is cooled in channel
// health and skipped, and nothing is sent to it.
var errNoCredential = errors.New("the channel's credential could not be obtained")

// credentialHeaders is ch's credential headers for the request as sent. A credential that
// cannot be had is logged, cools the channel (health.Credential) and answers
// errNoCredential: the caller skips the channel without sending it anything, so the
// client's prompt never reaches a provider that must refuse it. The logged error never
// carries a secret (package credential).
func (r *Request) credentialHeaders(ch *catalog.Channel, method, host, path string, body []byte) ([]Header, error) {
	ctx, cancel := context.WithTimeout(context.Background(), credentialTimeout)
	defer cancel()
	hs, err := ch.Credential().Headers(ctx, credential.Request{Method: method, Host: host, Path: path, Body: body})
	if err != nil {
		d := r.svc.cfg.Health.Failed(ch.Name, health.Credential)
		r.log().Warn("channel credential unavailable: the channel is skipped, nothing was sent to it",
			zap.String("channel", ch.Name), zap.Duration("cooldown", d), zap.Error(err))
		return nil, errNoCredential
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header(h)
	}
	return out, nil
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
