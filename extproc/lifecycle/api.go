package lifecycle

import (
	"context"

	"github.com/llmgw/gateway/extproc/anthropic"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/openai"
	"github.com/llmgw/gateway/extproc/pricing"
	"github.com/llmgw/gateway/extproc/response"
	"github.com/llmgw/gateway/extproc/translate"
	"github.com/llmgw/gateway/extproc/video"
	"github.com/llmgw/gateway/extproc/wire"
)

// Endpoint is a route the gateway serves: an index into endpoints, its one home.
type Endpoint int

const (
	EndpointUnknown Endpoint = iota
	EndpointChat
	EndpointMessages
	EndpointCountTokens
	EndpointModels
	EndpointResponses
	EndpointEmbeddings
	EndpointEmbeddingsMultimodal
	EndpointSpeech
	EndpointImages
	EndpointVideoSubmit
	// EndpointVideoGet is GET /v1/videos/{taskId}: answered or routed in the headers
	// phase, never billed.
	EndpointVideoGet
)

// Billing is how an endpoint's requests are held and charged (package doc, Units).
type Billing uint8

const (
	// BillNone: never billed (models list, count_tokens, video reads).
	BillNone Billing = iota
	// BillTokens: prompt estimate plus output limit held; the upstream's usage charged.
	BillTokens
	// BillInputTokens: the input's estimate held; usage.prompt_tokens charged.
	BillInputTokens
	// BillUnits: units × the unit price, held and charged exactly (spec.unit names them).
	BillUnits
)

// spec is everything that differs by endpoint: the rest of the lifecycle reads it and
// never asks which endpoint a request is. Adding an endpoint is one entry in endpoints
// (and, for a chat API, one codec in extproc/translate); TestEveryEndpointIsComplete
// holds each entry to what its kind of endpoint needs.
type spec struct {
	path   string // fixed path; empty for a templated one (video reads)
	method string
	env    apierr.Envelope
	// parse validates the body (nil: no body).
	parse func([]byte) (wire.Parsed, *apierr.Error)
	// kinds are the catalog kinds of the models served here.
	kinds []catalog.Kind
	// chat is the chat API the client speaks (0 when the endpoint is not a chat API):
	// any chat model answers, translated when its channel speaks another.
	chat translate.API
	// format is the format of the answer the client gets.
	format  response.Format
	billing Billing
	// unit is the ledger's usage unit of a BillUnits endpoint.
	unit pricing.Unit
	// operation is gen_ai.operation.name.
	operation string
	// keyOptional: the endpoint answers without a key too (the public models list).
	keyOptional bool

	// The hooks below call back into the lifecycle, which reads this table, so they are
	// set in init (as package-level initializers they would be an initialization cycle).

	// headers answers or routes a bodiless request in the headers phase (the models
	// list, video reads); taskID is a templated path's id. Nil: the body phase decides.
	headers func(r *Request, ctx context.Context, taskID string) Action
	// estimate answers with the prompt's estimate once the request is admitted: nothing
	// is priced, held or sent upstream (count_tokens).
	estimate func(r *Request) Action
	// rules applies the endpoint's rules that need the admitted model (step 10 of the
	// admission order) and sets the request's billed units. Nil: none.
	rules func(r *Request, ctx context.Context) *apierr.Error
	// channelOK keeps only the model's channels that serve this endpoint (nil: all).
	channelOK func(*catalog.Channel) bool
	// proxied settles a success whose body goes to the client as the provider sent it
	// (speech audio), at its headers; the action is the answer. Nil: the body is
	// rewritten and settled at its end.
	proxied func(r *Request, ctx context.Context, st *responseState, private []string) Action
	// settleJSON settles a complete JSON success and returns the body to send (or the
	// error to answer instead). Nil: the upstream's usage is charged.
	settleJSON func(r *Request, ctx context.Context, out []byte) ([]byte, *apierr.Error)
	// settleChunked settles a JSON success rewritten in chunks, at its end (images).
	// Nil: the upstream's usage is charged.
	settleChunked func(r *Request, ctx context.Context)
	// taskRead: the request reads a task, so an upstream 404 is task_not_found.
	taskRead bool
}

// chatKinds are the models every chat API serves (translated when the channel speaks
// another API).
var chatKinds = []catalog.Kind{catalog.KindChat, catalog.KindMessages, catalog.KindResponses}

var endpoints = [...]spec{
	EndpointUnknown: {env: apierr.OpenAI},
	EndpointChat: {path: "/v1/chat/completions", method: "POST", env: apierr.OpenAI, parse: openai.ParseChat,
		kinds: chatKinds, chat: translate.Chat, format: response.OpenAIChat, billing: BillTokens, operation: "chat"},
	EndpointMessages: {path: "/v1/messages", method: "POST", env: apierr.Anthropic, parse: anthropic.ParseMessages,
		kinds: chatKinds, chat: translate.Messages, format: response.AnthropicMessages, billing: BillTokens, operation: "chat"},
	EndpointCountTokens: {path: "/v1/messages/count_tokens", method: "POST", env: apierr.Anthropic, parse: anthropic.ParseCountTokens,
		kinds: chatKinds, billing: BillNone, operation: "count_tokens"},
	EndpointModels: {path: "/v1/models", method: "GET", env: apierr.OpenAI, keyOptional: true},
	EndpointResponses: {path: "/v1/responses", method: "POST", env: apierr.OpenAI, parse: openai.ParseResponses,
		kinds: chatKinds, chat: translate.Responses, format: response.OpenAIResponses, billing: BillTokens, operation: "chat"},
	EndpointEmbeddings: {path: "/v1/embeddings", method: "POST", env: apierr.OpenAI, parse: openai.ParseEmbeddings,
		kinds: []catalog.Kind{catalog.KindEmbeddings}, format: response.OpenAIEmbeddings, billing: BillInputTokens, operation: "embeddings"},
	EndpointEmbeddingsMultimodal: {path: "/v1/embeddings/multimodal", method: "POST", env: apierr.OpenAI, parse: openai.ParseMultimodalEmbeddings,
		kinds: []catalog.Kind{catalog.KindEmbeddings}, format: response.OpenAIEmbeddings, billing: BillInputTokens, operation: "embeddings"},
	EndpointSpeech: {path: "/v1/audio/speech", method: "POST", env: apierr.OpenAI, parse: openai.ParseSpeech,
		kinds: []catalog.Kind{catalog.KindSpeech}, billing: BillUnits, unit: pricing.Characters, operation: "generate_content"},
	EndpointImages: {path: "/v1/images/generations", method: "POST", env: apierr.OpenAI, parse: openai.ParseImages,
		kinds: []catalog.Kind{catalog.KindImage}, format: response.OpenAIImages, billing: BillUnits, unit: pricing.Images, operation: "generate_content"},
	EndpointVideoSubmit: {path: "/v1/video/generations", method: "POST", env: apierr.OpenAI, parse: video.ParseSubmit,
		kinds: []catalog.Kind{catalog.KindVideo}, format: response.VideoTask, billing: BillUnits, unit: pricing.Seconds, operation: "generate_content"},
	EndpointVideoGet: {method: "GET", env: apierr.OpenAI, kinds: []catalog.Kind{catalog.KindVideo},
		format: response.VideoTask, operation: "generate_content"},
}

func init() {
	endpoints[EndpointModels].headers = func(r *Request, ctx context.Context, _ string) Action { return r.listModels(ctx) }
	endpoints[EndpointVideoGet].headers = (*Request).videoTask
	endpoints[EndpointVideoGet].settleJSON = (*Request).settleVideoRead
	endpoints[EndpointVideoGet].taskRead = true
	endpoints[EndpointCountTokens].estimate = (*Request).answerEstimate
	endpoints[EndpointSpeech].rules = (*Request).speechRules
	endpoints[EndpointSpeech].proxied = (*Request).settleAudio
	endpoints[EndpointImages].rules = (*Request).unitRules
	endpoints[EndpointImages].settleChunked = (*Request).settleImages
	endpoints[EndpointVideoSubmit].rules = (*Request).videoRules
	endpoints[EndpointVideoSubmit].settleJSON = (*Request).settleVideo
	endpoints[EndpointEmbeddingsMultimodal].channelOK = func(c *catalog.Channel) bool { return c.MultimodalEmbeddings }
}

// videoTaskPrefix is the path prefix of GET /v1/videos/{taskId}.
const videoTaskPrefix = "/v1/videos/"

// byPath finds the endpoint of a request path (without its query string); taskID is
// the id of a video read.
func byPath(path string) (e Endpoint, taskID string, ok bool) {
	for i := range endpoints {
		if endpoints[i].path != "" && endpoints[i].path == path {
			return Endpoint(i), "", true
		}
	}
	if len(path) >= len(videoTaskPrefix) && path[:len(videoTaskPrefix)] == videoTaskPrefix {
		return EndpointVideoGet, path[len(videoTaskPrefix):], true
	}
	return EndpointUnknown, "", false
}

// spec is the endpoint's table entry.
func (e Endpoint) spec() *spec {
	if e < 0 || int(e) >= len(endpoints) {
		return &endpoints[EndpointUnknown]
	}
	return &endpoints[e]
}

// Path returns the endpoint's route as a fixed template ("/v1/chat/completions",
// "/v1/videos/{task_id}"), or "unknown": a label of bounded cardinality.
func (e Endpoint) Path() string {
	switch s := e.spec(); {
	case e == EndpointVideoGet:
		return videoTaskPrefix + "{task_id}"
	case s.path != "":
		return s.path
	}
	return "unknown"
}

// serves reports whether the endpoint serves models of kind k.
func (s *spec) serves(k catalog.Kind) bool {
	for _, x := range s.kinds {
		if x == k {
			return true
		}
	}
	return false
}

// chatFormats are the chat APIs' response formats.
var chatFormats = map[translate.API]response.Format{
	translate.Chat:      response.OpenAIChat,
	translate.Messages:  response.AnthropicMessages,
	translate.Responses: response.OpenAIResponses,
}
