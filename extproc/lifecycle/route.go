package lifecycle

// Routing: the channel the admitted request goes to, and the request as that channel
// must receive it.

import (
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/extproc/health"
	"github.com/llmgw/gateway/extproc/openai"
	"github.com/llmgw/gateway/extproc/response"
	"github.com/llmgw/gateway/extproc/translate"
	"github.com/llmgw/gateway/extproc/wire"
	"go.uber.org/zap"
)

// candidates are the admitted model's channels open to the key's tier (and, for
// multimodal embeddings, only the channels that serve them).
func (r *Request) candidates() []*catalog.Channel {
	cs := r.model.Candidates(r.grant.Tier)
	keep := r.endpoint.spec().channelOK
	if keep == nil {
		return cs
	}
	out := cs[:0]
	for _, c := range cs {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// mutate picks the channel and rewrites the request for it (rewriteFor); with failover,
// it routes the request to its failover cluster instead, and each attempt rewrites it
// for the channel Envoy picked (failover.go). The error is a *translate.Unsupported when
// a field cannot be carried to the channel's API.
func (r *Request) mutate(body []byte) (Action, error) {
	set := r.candidates()
	if r.failoverEligible(set) {
		return r.routeFailover(body, set)
	}
	// A channel whose credential cannot be had is skipped (it cools): the next in the
	// failover order is tried, and with none left the request is refused before its hold.
	left := slices.Clone(set)
	for {
		ch, err := r.pickChannel(left)
		if err != nil {
			return Action{}, err
		}
		r.channel = ch
		a, xlate, err := r.rewriteFor(ch, body, r.upstreamHost(ch))
		r.xlate = xlate
		if errors.Is(err, errNoCredential) {
			r.channel, r.xlate = nil, nil
			if left = slices.DeleteFunc(left, func(c *catalog.Channel) bool { return c == ch }); len(left) == 0 {
				return Action{}, r.noChannelFor(set)
			}
			continue
		}
		if err != nil {
			return Action{}, err
		}
		// The routing header goes second, after content-length (the order the replies had
		// before failover existed).
		a.SetHeaders = slices.Insert(a.SetHeaders, 1, Header{RoutingHeader, ch.Cluster})
		a.ClearRouteCache = true
		return a, nil
	}
}

// rewriteFor is the request as channel ch must receive it (rewriteUnsigned) with the
// channel's credential, computed over the final bytes for host, the host header the
// upstream will receive; errNoCredential when the credential cannot be had.
func (r *Request) rewriteFor(ch *catalog.Channel, body []byte, host string) (Action, *translate.Translator, error) {
	u, err := r.rewriteUnsigned(ch, body)
	if err != nil {
		return Action{}, nil, err
	}
	a, err := u.sign(r, ch, host)
	return a, u.xlate, err
}

// rewrite is the request as one channel must receive it but for the channel's
// credential (sign adds it), and the translator of its answer.
type rewrite struct {
	act   Action
	xlate *translate.Translator
	path  string // the path the channel receives, which its credential covers
	// signed: act carries the channel's credential (a failover candidate signed when
	// routed); noCredential: the credential could not be had when routed.
	signed, noCredential bool
}

// sign is the rewrite's action with ch's credential headers for host, or
// errNoCredential. A credential may reach a token endpoint (credential.go), so it is
// computed only for a channel the request may be sent to.
func (u rewrite) sign(r *Request, ch *catalog.Channel, host string) (Action, error) {
	hs, err := r.credentialHeaders(ch, http.MethodPost, host, u.path, u.act.Body)
	if err != nil {
		return Action{}, err
	}
	a := u.act
	a.SetHeaders = append(slices.Clone(a.SetHeaders), hs...)
	return a, nil
}

// rewriteUnsigned is the request as channel ch must receive it: translated into the
// channel's API when the client speaks another (translation.go; the translator is
// returned for the answer), else edited in place (the model id, and stream usage on a
// chat stream), every other byte kept; with the channel's path and API headers, and
// every client credential header removed.
func (r *Request) rewriteUnsigned(ch *catalog.Channel, body []byte) (rewrite, error) {
	path, body, xlate, err := r.translateFor(ch, body)
	if err != nil {
		return rewrite{}, err
	}
	if xlate == nil {
		// The upstream model, and for a streamed OpenAI chat request a usage chunk asked
		// for, set in one walk of the body's members and one copy.
		model, err := wire.SetModel(ch.UpstreamModel)
		if err != nil {
			return rewrite{}, err
		}
		sets := []wire.Set{model}
		if upstreamAPI(r.model, ch) == translate.Chat && r.endpoint.spec().chat == translate.Chat && r.parsed.Stream && !r.parsed.IncludeUsage {
			sets = append(sets, openai.IncludeUsage)
		}
		var ok bool
		if body, ok = wire.SetMembers(body, sets...); !ok {
			return rewrite{}, errors.New("lifecycle: the request body is not a JSON object")
		}
	}
	a := Action{
		Body:        body,
		ReplaceBody: true,
		SetHeaders: []Header{
			{"content-length", strconv.Itoa(len(body))},
			identityEncoding,
		},
	}
	if path != "" {
		a.SetHeaders = append(a.SetHeaders, Header{":path", path})
	} else {
		path = r.path
	}
	a.RemoveHeaders = slices.Clone(credential.HeaderNames)
	set, remove := r.versionHeaders(ch)
	a.SetHeaders, a.RemoveHeaders = append(a.SetHeaders, set...), append(a.RemoveHeaders, remove...)
	return rewrite{act: a, xlate: xlate, path: path}, nil
}

// identityEncoding asks an upstream for an uncompressed answer. Envoy forwards the
// client's accept-encoding (the SDKs send gzip) and providers honour it; the rewriter
// reads the answer's bytes, and an answer extproc does not rewrite (speech audio) goes
// to the client as is, so it must not carry an encoding the client never accepted. A
// provider that compresses anyway is decoded (see ResponseHeaders).
var identityEncoding = Header{"accept-encoding", "identity"}

// noChannel: every candidate channel is cooling on this replica (package health); code
// is the answer: upstream_account_unavailable when every one cools for its account,
// else service_unavailable ("no eligible healthy channel", spec).
type noChannel struct{ code apierr.Code }

func (e *noChannel) Error() string { return "no healthy channel: " + string(e.code) }

// noChannelFor is the answer when none of chs may be used on this replica.
func (r *Request) noChannelFor(chs []*catalog.Channel) *noChannel {
	code := apierr.UpstreamAccountUnavailable
	for _, ch := range chs {
		if _, f := r.svc.cfg.Health.State(ch.Name); f != health.Account {
			code = apierr.ServiceUnavailable
		}
	}
	return &noChannel{code}
}

// pickChannel is the first channel of the failover order (catalog.Order) of candidates
// that this replica's health lets the request use; a channel whose cooldown is over is
// used as its single probe.
func (r *Request) pickChannel(candidates []*catalog.Channel) (*catalog.Channel, error) {
	order := catalog.Order(candidates, r.svc.cfg.Intn)
	if len(order) == 0 {
		return nil, errors.New("no candidate channel after admission")
	}
	for _, ch := range order {
		if ok, _ := r.svc.cfg.Health.Acquire(ch.Name); ok {
			return ch, nil
		}
	}
	return nil, r.noChannelFor(order)
}

// reportHealth tells the channel's health what its answer was: status is the upstream's
// (or Envoy's local reply's), code the classification of a failure ("" for a usable
// answer), body the error body when there was one. A refusal of the request itself
// (invalid_request) says nothing of the channel.
func (r *Request) reportHealth(status int, code apierr.Code, body []byte) {
	if r.channel == nil || r.attemptReported() {
		// A failover attempt's own stream reported its failure (attempt.go).
		return
	}
	h := r.svc.cfg.Health
	switch {
	case code == "":
		h.Succeeded(r.channel.Name)
		return
	case status == 429 && !response.AccountRefusal(body):
		h.Failed(r.channel.Name, health.RateLimited)
	case code == apierr.UpstreamAccountUnavailable:
		h.Failed(r.channel.Name, health.Account)
	case code == apierr.ServiceUnavailable:
		h.Failed(r.channel.Name, health.Transport)
	case status >= 500:
		// A 5xx the classification calls upstream_error; an unusable 2xx (a body that
		// is not the API's) says nothing of the channel's health.
		h.Failed(r.channel.Name, health.ServerError)
	default:
		return
	}
	r.log().Warn("channel failed: skipped by later requests while it cools",
		zap.String("channel", r.channel.Name), zap.Int("status", status), zap.String("code", string(code)))
}
