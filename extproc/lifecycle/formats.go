package lifecycle

import (
	"net/url"
	"strings"

	"github.com/aws/smithy-go/encoding/httpbinding"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/translate"
)

// channelFormat is everything that differs by a channel's wire format: the rest of the
// lifecycle reads it and never asks which format a channel has. Adding a format is one
// entry in formats and, for an API no client speaks, one codec in extproc/translate.
type channelFormat struct {
	// api is the chat API a channel of this format speaks for a model of kind k: the
	// codec that writes its requests and reads its answers.
	api func(k catalog.Kind) translate.API
	// basePath is the path prefix when the channel sets no base_path ("": none);
	// {project} and {location} stand for the channel's gcp.project and gcp.location.
	basePath string
	// path is the upstream path of a chat request after the channel's base path: model
	// is the channel's upstream model, clientPath the path of the client's endpoint
	// (its /v1 prefix removed by the caller).
	path func(model, clientPath string, api translate.API, stream bool) string
	// versionHeader: the upstream reads the anthropic-version header (Anthropic's own
	// API; Claude on Vertex takes its version in the body).
	versionHeader bool
}

var formats = map[catalog.Format]channelFormat{
	catalog.FormatOpenAI: {api: openAIAPI, basePath: "/v1", path: apiPath},
	catalog.FormatAnthropic: {api: fixedAPI(translate.Messages), basePath: "/v1", path: apiPath,
		versionHeader: true},
	catalog.FormatGemini: {api: fixedAPI(translate.Gemini), basePath: "/v1beta",
		path: modelPath(url.PathEscape, "/models/", ":generateContent", ":streamGenerateContent?alt=sse")},
	catalog.FormatVertexGemini: {api: fixedAPI(translate.Gemini), basePath: vertexBasePath,
		path: modelPath(url.PathEscape, "/publishers/google/models/", ":generateContent", ":streamGenerateContent?alt=sse")},
	catalog.FormatVertexAnthropic: {api: fixedAPI(translate.VertexMessages), basePath: vertexBasePath,
		path: modelPath(url.PathEscape, "/publishers/anthropic/models/", ":rawPredict", ":streamRawPredict")},
	catalog.FormatBedrock: {api: fixedAPI(translate.Bedrock),
		path: modelPath(awsPathEscape, "/model/", "/converse", "/converse-stream")},
}

// vertexBasePath is where Vertex AI serves a project's models in a region. The catalog
// accepts as gcp.project and gcp.location only names that are plain path segments.
const vertexBasePath = "/v1/projects/{project}/locations/{location}"

// openAIAPI: an OpenAI channel of a Responses model speaks Responses, of any other chat
// model Chat Completions.
func openAIAPI(k catalog.Kind) translate.API {
	if k == catalog.KindResponses {
		return translate.Responses
	}
	return translate.Chat
}

func fixedAPI(api translate.API) func(catalog.Kind) translate.API {
	return func(catalog.Kind) translate.API { return api }
}

// apiPath is the path of the chat API the channel speaks, or of the client's endpoint
// when it is no chat API (embeddings, speech).
func apiPath(_, clientPath string, api translate.API, _ bool) string {
	if p, ok := upstreamPaths[api]; ok {
		return strings.TrimPrefix(p, "/v1")
	}
	return clientPath
}

// modelPath is a path naming the model, escaped by escape, then the method for a
// complete answer or a stream.
func modelPath(escape func(string) string, prefix, call, stream string) func(string, string, translate.API, bool) string {
	return func(model, _ string, _ translate.API, streamed bool) string {
		m := call
		if streamed {
			m = stream
		}
		return prefix + escape(model) + m
	}
}

// awsPathEscape escapes a Bedrock model id (which holds ':', and '/' in an ARN) as the
// AWS SDKs escape a path label: every byte but A-Z, a-z, 0-9 and -._~. The request is
// signed over this path as sent (extproc/credential).
func awsPathEscape(s string) string { return httpbinding.EscapePath(s, true) }

// upstreamPaths are the chat APIs' upstream paths on an OpenAI or Anthropic host.
var upstreamPaths = map[translate.API]string{
	translate.Chat:      endpoints[EndpointChat].path,
	translate.Messages:  endpoints[EndpointMessages].path,
	translate.Responses: endpoints[EndpointResponses].path,
}

// upstreamAPI is the chat API channel ch of model m speaks; 0 for a format that speaks
// none (video, which has no entry in formats).
func upstreamAPI(m *catalog.Model, ch *catalog.Channel) translate.API {
	f, ok := formats[ch.Format]
	if !ok {
		return 0
	}
	return f.api(m.Kind)
}

// upstreamPath is the path of a request to channel ch: its base path, then the
// format's path for the chat API api (0 for an endpoint that is no chat API, whose
// clientPath is kept after the base path).
func upstreamPath(ch *catalog.Channel, clientPath string, api translate.API, stream bool) string {
	f := formats[ch.Format]
	base := ch.BasePath
	if base == "" {
		base = f.basePath
		if g := ch.GCP; g != nil {
			base = strings.NewReplacer("{project}", g.Project, "{location}", g.Location).Replace(base)
		}
	}
	if f.path == nil {
		return clientPath
	}
	return base + f.path(ch.UpstreamModel, strings.TrimPrefix(clientPath, "/v1"), api, stream)
}

// versionHeaders are the anthropic-version header to set or remove for channel ch.
// Only an Anthropic host reads it: the client's reached here only from an Anthropic
// endpoint (RequestHeaders removes it from the others), and goes on to an Anthropic
// host as the client sent it.
func (r *Request) versionHeaders(ch *catalog.Channel) (set []Header, remove []string) {
	fromClient := r.clientVersion && r.env == apierr.Anthropic
	switch {
	case formats[ch.Format].versionHeader && !fromClient:
		set = []Header{{"anthropic-version", AnthropicVersion}}
	case !formats[ch.Format].versionHeader && fromClient:
		remove = []string{"anthropic-version"}
	}
	return set, remove
}
