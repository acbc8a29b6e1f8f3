package lifecycle

import (
	"strings"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/translate"
)

// A channel's format is a row of the format table (translate.Format): the chat API it
// speaks, its path shape, its credential style. The lifecycle reads the row and never
// asks which format a channel has; adding a format changes no file here.

// formatOf is the row of channel ch's format (the catalog accepts only formats of the
// table).
func formatOf(ch *catalog.Channel) *translate.Format {
	f, _ := translate.FormatNamed(string(ch.Format))
	if f == nil {
		return &translate.Format{}
	}
	return f
}

// upstreamAPI is the chat API channel ch of model m speaks; 0 for a format that speaks
// none (video).
func upstreamAPI(m *catalog.Model, ch *catalog.Channel) translate.API {
	return formatOf(ch).APIFor(m.Kind == catalog.KindResponses)
}

// upstreamPath is the path of a request to channel ch: its base path, then the
// format's path for the chat API api: the model's path, or the API's own (for an
// endpoint that is no chat API, api 0, the client's path, its /v1 prefix removed). A
// format that speaks no chat API keeps the client's path whole.
func upstreamPath(ch *catalog.Channel, clientPath string, api translate.API, stream bool) string {
	f := formatOf(ch)
	if f.API == 0 {
		return clientPath
	}
	base := ch.BasePath
	if base == "" {
		base = f.Path.Base
		if g := ch.GCP; g != nil {
			base = strings.NewReplacer("{project}", g.Project, "{location}", g.Location).Replace(base)
		}
	}
	if p, ok := f.Path.ModelPath(ch.UpstreamModel, stream); ok {
		return base + p
	}
	if p, ok := upstreamPaths[api]; ok {
		return base + strings.TrimPrefix(p, "/v1")
	}
	return base + strings.TrimPrefix(clientPath, "/v1")
}

// upstreamPaths are the chat APIs' upstream paths on an OpenAI or Anthropic host.
var upstreamPaths = map[translate.API]string{
	translate.Chat:      endpoints[EndpointChat].path,
	translate.Messages:  endpoints[EndpointMessages].path,
	translate.Responses: endpoints[EndpointResponses].path,
}

// versionHeaders are the anthropic-version header to set or remove for channel ch.
// Only an Anthropic host reads it: the client's reached here only from an Anthropic
// endpoint (RequestHeaders removes it from the others), and goes on to an Anthropic
// host as the client sent it.
func (r *Request) versionHeaders(ch *catalog.Channel) (set []Header, remove []string) {
	fromClient := r.clientVersion && r.env == apierr.Anthropic
	switch want := formatOf(ch).VersionHeader; {
	case want && !fromClient:
		set = []Header{{"anthropic-version", AnthropicVersion}}
	case !want && fromClient:
		remove = []string{"anthropic-version"}
	}
	return set, remove
}
