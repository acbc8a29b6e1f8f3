package translate

import (
	"net/url"
	"slices"

	"github.com/aws/smithy-go/encoding/httpbinding"
)

// Format is an upstream channel format, named by the catalog's `format` of a channel:
// the chat API its channels speak and how a request reaches them and is authenticated.
// The catalog validates channels against the rows of formats and the lifecycle routes by
// them; neither names a format. A new cloud is one codec (for an API no client speaks,
// its API constant and its upstreamOnly entry) and one row.
type Format struct {
	// Name is the catalog's name of the format.
	Name string
	// API is the chat API its channels speak (0: none, video); ResponsesAPI the one
	// for a Responses model when it differs (0: API).
	API, ResponsesAPI API
	// Other lists the model kinds besides chat its channels serve (catalog kinds:
	// embeddings, speech, image, video), each on the client's own endpoint path.
	Other []string
	// Path is where a request goes.
	Path Path
	// Credential is how its channels authenticate; KeyHeader the header a key goes in
	// when a channel names none (CredentialKey only).
	Credential Credential
	KeyHeader  string
	// VersionHeader: the upstream reads the anthropic-version header (Anthropic's own
	// API; Claude on Vertex takes its version in the body).
	VersionHeader bool
}

// Path is the shape of an upstream path: the base path, then either the chat API's own
// path (Model "") or the model's path.
type Path struct {
	// Base is the prefix when the channel sets no base_path ("": none); {project} and
	// {location} stand for the channel's gcp.project and gcp.location.
	Base string
	// Model, Call and Stream: the path is Model, the escaped model id, then Call for a
	// complete answer or Stream for a stream.
	Model, Call, Stream string
	// Escape escapes the model id (url.PathEscape when nil).
	Escape func(string) string
}

// Credential is how a format's channels authenticate.
type Credential uint8

const (
	// CredentialKey is a static key in a header.
	CredentialKey Credential = iota + 1
	// CredentialAWS is AWS Signature V4 over the bytes sent.
	CredentialAWS
	// CredentialGCP is a Google service account's access token.
	CredentialGCP
)

func (c Credential) String() string {
	switch c {
	case CredentialKey:
		return "key"
	case CredentialAWS:
		return "aws"
	case CredentialGCP:
		return "gcp"
	}
	return "none"
}

// vertexBase is where Vertex AI serves a project's models in a region.
const vertexBase = "/v1/projects/{project}/locations/{location}"

// formats are the upstream formats, one row each.
var formats = []Format{
	{Name: "openai", API: Chat, ResponsesAPI: Responses, Other: []string{"embeddings", "speech", "image"},
		Path: Path{Base: "/v1"}, Credential: CredentialKey, KeyHeader: "authorization"},
	{Name: "anthropic", API: Messages, Path: Path{Base: "/v1"}, Credential: CredentialKey, KeyHeader: "x-api-key",
		VersionHeader: true},
	{Name: "gemini", API: Gemini, Credential: CredentialKey, KeyHeader: "x-goog-api-key",
		Path: Path{Base: "/v1beta", Model: "/models/", Call: ":generateContent", Stream: ":streamGenerateContent?alt=sse"}},
	{Name: "vertex-gemini", API: Gemini, Credential: CredentialGCP,
		Path: Path{Base: vertexBase, Model: "/publishers/google/models/", Call: ":generateContent", Stream: ":streamGenerateContent?alt=sse"}},
	{Name: "vertex-anthropic", API: VertexMessages, Credential: CredentialGCP,
		Path: Path{Base: vertexBase, Model: "/publishers/anthropic/models/", Call: ":rawPredict", Stream: ":streamRawPredict"}},
	// The model id (which holds ':', and '/' in an ARN) escaped as the AWS SDKs escape a
	// path label; the request is signed over the path as sent.
	{Name: "bedrock", API: Bedrock, Credential: CredentialAWS,
		Path: Path{Model: "/model/", Call: "/converse", Stream: "/converse-stream", Escape: awsPathEscape}},
	{Name: "video", Other: []string{"video"}, Credential: CredentialKey, KeyHeader: "authorization"},
}

// awsPathEscape escapes every byte but A-Z, a-z, 0-9 and -._~, as the AWS SDKs escape a
// path label.
func awsPathEscape(s string) string { return httpbinding.EscapePath(s, true) }

// FormatNamed is the format the catalog names name.
func FormatNamed(name string) (*Format, bool) {
	i := slices.IndexFunc(formats, func(f Format) bool { return f.Name == name })
	if i < 0 {
		return nil, false
	}
	return &formats[i], true
}

// Formats are the formats' names, in the table's order.
func Formats() []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.Name
	}
	return names
}

// APIFor is the chat API a channel of f speaks for a model that is a Responses model
// (responses) or another chat model; 0 for a format that speaks none.
func (f *Format) APIFor(responses bool) API {
	if responses && f.ResponsesAPI != 0 {
		return f.ResponsesAPI
	}
	return f.API
}

// ModelPath is the path after the base of a chat request naming model, for a complete
// answer or a stream; ok false when the format's path is its chat API's own.
func (p Path) ModelPath(model string, stream bool) (path string, ok bool) {
	if p.Model == "" {
		return "", false
	}
	escape := p.Escape
	if escape == nil {
		escape = url.PathEscape
	}
	m := p.Call
	if stream {
		m = p.Stream
	}
	return p.Model + escape(model) + m, true
}
