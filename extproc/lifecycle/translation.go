package lifecycle

import (
	"mime"

	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/response"
	"github.com/llmgw/gateway/extproc/translate"
)

// Translation: a chat model answers on every chat API whatever its channel speaks. When
// the client's API (the endpoint's spec.chat) and the channel's (upstreamAPI) differ,
// the request body is translated before the hold (so a field that cannot be carried is
// refused with nothing held), the path is the channel's, and the answer is translated
// back after the usual rewrite: the response rewriter reads the upstream's own format
// (usage exactly as the provider reported it, the model id made public), and the
// translator turns that into the client's format. The charge is therefore the same
// whatever API the client spoke.

// translateFor returns the upstream path (the channel's format's, "" when the
// client's path stays), and the body and translator when channel ch speaks another
// chat API than the client's; else the body unchanged and no translator.
func (r *Request) translateFor(ch *catalog.Channel, body []byte) (path string, out []byte, t *translate.Translator, err error) {
	sp := r.endpoint.spec()
	if sp.path == "" {
		return "", body, nil, nil
	}
	api := translate.API(0)
	if sp.chat != 0 {
		api = upstreamAPI(r.model, ch)
	}
	if path = upstreamPath(ch, sp.path, api, r.parsed.Stream); path == sp.path {
		path = ""
	}
	t, ok := translate.New(sp.chat, api)
	if !ok {
		return path, body, nil, nil
	}
	out, err = t.Request(body, translate.RequestOptions{
		UpstreamModel: ch.UpstreamModel,
		MaxOutput:     r.model.MaxOutputTokens,
	})
	if err != nil {
		return "", nil, nil, err
	}
	return path, out, t, nil
}

// upstreamFormat is the format the upstream answers in: the channel's chat API when
// translated, else the endpoint's own.
func (r *Request) upstreamFormat() response.Format { return r.upstreamFormatOf(r.xlate) }

// upstreamFormatOf is the format an upstream answers in when t translates (nil: none).
func (r *Request) upstreamFormatOf(t *translate.Translator) response.Format {
	if t != nil {
		return chatFormats[translate.Reads(t.Upstream())]
	}
	return r.format()
}

// successType is the content type a success is judged on: a stream in the upstream
// API's own stream type (Bedrock's event stream) counts as server-sent events, which
// the normalizer makes of it.
func (r *Request) successType(ct string) string {
	if r.xlate == nil || !r.parsed.Stream {
		return ct
	}
	if want := translate.StreamMediaType(r.xlate.Upstream()); mediaType(ct) == want {
		return "text/event-stream"
	}
	return ct
}

// normalizer is the normalizer of the answer of an upstream-only API (nil for others).
func (r *Request) normalizer() *translate.Normalizer {
	if r.xlate == nil {
		return nil
	}
	return translate.NewNormalizer(r.xlate.Upstream(), r.parsed.Stream, r.responseOptions())
}

// mediaType is ct's media type, lowercase ("" when ct does not parse).
func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ""
	}
	return mt
}

// responseOptions label the translated answer.
func (r *Request) responseOptions() translate.ResponseOptions {
	return translate.ResponseOptions{
		PublicModel:  r.model.ID,
		Created:      r.svc.cfg.Now().Unix(),
		IncludeUsage: r.parsed.IncludeUsage,
	}
}

// translateBody turns the rewritten upstream bytes into the client's: stream chunks as
// they come, a JSON body once whole (the rewriter hands it over at its end).
func (r *Request) translateBody(out []byte, endOfStream bool) ([]byte, error) {
	st := r.resp
	if r.xlate == nil {
		return out, nil
	}
	if r.parsed.Stream {
		if st.xs == nil {
			st.xs = r.xlate.Stream(r.responseOptions())
		}
		return st.xs.Write(out, endOfStream)
	}
	if !endOfStream {
		return nil, nil
	}
	return r.xlate.Response(out, r.responseOptions())
}
