package translate

import (
	"errors"
	"fmt"

	"github.com/llmgw/gateway/extproc/sse"
)

// API is a chat wire format a client may speak or an upstream channel may serve.
type API uint8

const (
	// Chat is OpenAI Chat Completions (POST /v1/chat/completions).
	Chat API = iota + 1
	// Messages is Anthropic Messages (POST /v1/messages).
	Messages
	// Responses is OpenAI Responses, stateless subset (POST /v1/responses).
	Responses

	// The APIs below are upstream APIs only: no client speaks them.

	// Gemini is the Gemini API's generateContent, served by Google AI and Vertex AI.
	Gemini
	// Bedrock is the Amazon Bedrock Converse API.
	Bedrock
	// VertexMessages is Anthropic Messages on Vertex AI: the model is in the path, the
	// body carries anthropic_version instead.
	VertexMessages
)

func (a API) String() string {
	switch a {
	case Chat:
		return "chat"
	case Messages:
		return "messages"
	case Responses:
		return "responses"
	}
	if u, ok := upstreamOnly[a]; ok {
		return u.name
	}
	return fmt.Sprintf("API(%d)", uint8(a))
}

// RequestOptions say what the upstream request must carry beyond the client's fields.
type RequestOptions struct {
	// UpstreamModel is the channel's model id.
	UpstreamModel string
	// MaxOutput is the output limit to send when the client gave none and the upstream
	// API requires one (Anthropic's max_tokens): the model's published maximum.
	MaxOutput int64
}

// ResponseOptions say how the client's answer is labelled.
type ResponseOptions struct {
	// PublicModel is the model id the client asked for; every answer and event names it.
	PublicModel string
	// Created is the Unix time to report when the upstream gave none.
	Created int64
	// IncludeUsage: the client asked for usage at the end of its stream (chat); other
	// APIs always carry it.
	IncludeUsage bool
}

// Unsupported refuses a request whose meaning would be lost in translation: the
// lifecycle answers 400 invalid_request naming Param.
type Unsupported struct {
	// Param is the client's field, as a JSON path ("n", "messages[2].content[0]").
	Param   string
	Message string
}

func (e *Unsupported) Error() string { return e.Message }

// unsupported returns an *Unsupported for param.
func unsupported(param, format string, args ...any) error {
	return &Unsupported{Param: param, Message: fmt.Sprintf(format, args...)}
}

// ErrMalformed is wrapped by errors about upstream bodies or events that are not the
// upstream API's shape: the lifecycle treats such an answer as unusable.
var ErrMalformed = errors.New("translate: malformed upstream answer")

// The halves of a codec. Decoders read the API's wire bytes into the neutral model;
// encoders write it. A request decoder refuses with *Unsupported what the neutral model
// cannot carry; a request encoder refuses what its API cannot honour.
type (
	// clientHalves read a client's request and write its answer.
	clientHalves interface {
		decodeRequest(body []byte) (*Request, error)
		encodeResponse(r *Response, o ResponseOptions) ([]byte, error)
		newStreamEncoder(o ResponseOptions) streamEncoder
	}
	// upstreamHalves write an upstream's request and read its answer.
	upstreamHalves interface {
		encodeRequest(r *Request, o RequestOptions) ([]byte, error)
		decodeResponse(body []byte) (*Response, error)
		newStreamDecoder() streamDecoder
	}
	// codec is a client API's six halves.
	codec interface {
		clientHalves
		upstreamHalves
	}
)

// streamDecoder turns one upstream event into neutral events.
type streamDecoder interface {
	decode(ev *sse.Event, emit func(Event)) error
}

// streamEnder is a streamDecoder whose API has no end-of-stream event (Gemini, Bedrock
// after its metadata): end is called once the upstream's last byte came.
type streamEnder interface {
	end(emit func(Event)) error
}

// streamEncoder appends the client's bytes for one neutral event to dst.
type streamEncoder interface {
	encode(dst []byte, e Event) ([]byte, error)
}

// codecs is the table of client APIs: adding one is one entry here and one codec.
var codecs = map[API]codec{
	Chat:      chatCodec{},
	Messages:  messagesCodec{},
	Responses: responsesCodec{},
}

// upstreamOnly is the table of upstream-only APIs, one entry each: an API no client
// speaks is its constant, its codec and this entry (and, to be reached, a row of the
// format table, formats.go). Each answers in its own bytes, read by its decoders into
// the neutral model and written as the API in reads (the one the lifecycle's response
// rewriter reads: usage, model id) before the client's codec writes the client's answer.
var upstreamOnly = map[API]struct {
	name  string
	codec upstreamHalves
	reads API
	// native: the answer is in the API's own bytes (not already those of reads).
	native bool
	// framing reads the upstream's stream (nil: server-sent events) of media type
	// streamType.
	framing    func() framing
	streamType string
	// fields is what it does with each feature of a request (upstream_fields.go);
	// title names its section of the docs' conformance tables ("": the table is
	// another API's, documented there).
	fields *upstreamTable
	title  string
}{
	Gemini: {name: "gemini", codec: geminiCodec{}, reads: Messages, native: true, streamType: sseType,
		fields: &geminiUpstream, title: "Gemini generateContent (Gemini API, Vertex AI)"},
	Bedrock: {name: "bedrock", codec: bedrockCodec{}, reads: Messages, native: true,
		framing: newEventStreamFraming, streamType: eventStreamType,
		fields: &bedrockUpstream, title: "Amazon Bedrock Converse"},
	VertexMessages: {name: "vertex-messages", codec: vertexMessagesCodec{}, reads: Messages, streamType: sseType,
		fields: &messagesUpstream},
}

// The media types of upstream streams.
const (
	sseType         = "text/event-stream"
	eventStreamType = "application/vnd.amazon.eventstream"
)

// StreamMediaType is the media type of a stream answered by an upstream speaking api.
func StreamMediaType(api API) string {
	if u, ok := upstreamOnly[api]; ok {
		return u.streamType
	}
	return sseType
}

// framing splits an upstream stream, fed in chunks cut at any byte, into events.
type framing interface {
	Feed(chunk []byte, emit func(*sse.Event) error) error
	Finish(emit func(*sse.Event) error) error
}

// upstreamCodec is the upstream halves of api.
func upstreamCodec(api API) (upstreamHalves, bool) {
	if c, ok := codecs[api]; ok {
		return c, true
	}
	u, ok := upstreamOnly[api]
	return u.codec, ok
}

// Reads is the API whose bytes the lifecycle's response rewriter reads for an upstream
// speaking api: its own for a client API, the normalized one for an upstream-only API.
func Reads(api API) API {
	if u, ok := upstreamOnly[api]; ok {
		return u.reads
	}
	return api
}

// Native reports whether an upstream speaking api answers in bytes the response
// rewriter cannot read, so that a Normalizer must turn them into Reads(api)'s first.
func Native(api API) bool { return upstreamOnly[api].native }

// Translator translates between a client API and an upstream API.
type Translator struct {
	client, upstream API
	clientCodec      codec
	// upstreamCodec writes the request; readCodec reads the rewritten answer (the
	// upstream's, or for an upstream-only API the one it is normalized into), nil when
	// the client reads that API itself.
	upstreamCodec upstreamHalves
	readCodec     codec
}

// New returns the translator for a client speaking client and a channel serving
// upstream; ok is false when they are the same API (no translation), the client's is
// not a client API or the upstream's is unknown. An upstream-only API is always
// translated.
func New(client, upstream API) (t *Translator, ok bool) {
	c, ok1 := codecs[client]
	u, ok2 := upstreamCodec(upstream)
	if !ok1 || !ok2 || client == upstream {
		return nil, false
	}
	t = &Translator{client: client, upstream: upstream, clientCodec: c, upstreamCodec: u}
	if r := Reads(upstream); r != client {
		t.readCodec = codecs[r]
	}
	return t, true
}

// Client is the client's API.
func (t *Translator) Client() API { return t.client }

// Upstream is the upstream's API.
func (t *Translator) Upstream() API { return t.upstream }

// Request translates the client's request body into the upstream's: the upstream's
// table (upstreamFields) refuses or drops what it cannot take, its encoder writes the
// rest. The error is an *Unsupported when a field cannot be carried over.
func (t *Translator) Request(body []byte, o RequestOptions) ([]byte, error) {
	r, err := t.clientCodec.decodeRequest(body)
	if err != nil {
		return nil, err
	}
	r.Client = t.client
	if err := admit(t.upstream, r); err != nil {
		return nil, err
	}
	return t.upstreamCodec.encodeRequest(r, o)
}

// Response translates a complete successful answer, in Reads(upstream)'s bytes, into
// the client's.
func (t *Translator) Response(body []byte, o ResponseOptions) ([]byte, error) {
	if t.readCodec == nil {
		return body, nil
	}
	r, err := t.readCodec.decodeResponse(body)
	if err != nil {
		return nil, err
	}
	return t.clientCodec.encodeResponse(r, o)
}

// Stream returns a translator of one stream, in Reads(upstream)'s events, into the
// client's.
func (t *Translator) Stream(o ResponseOptions) *Stream {
	if t.readCodec == nil {
		return &Stream{}
	}
	return &Stream{
		in:  sse.NewDecoder(0),
		dec: t.readCodec.newStreamDecoder(),
		enc: t.clientCodec.newStreamEncoder(o),
	}
}

// Stream translates one upstream event stream, fed in chunks split at any byte. Not
// safe for concurrent use.
type Stream struct {
	in  framing // nil: the bytes pass as they are
	dec streamDecoder
	enc streamEncoder
	out []byte
	err error
}

// Write feeds the next upstream chunk (endOfStream on the last) and returns the
// client's bytes it completes. The returned slice is valid until the next call.
func (s *Stream) Write(chunk []byte, endOfStream bool) ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.in == nil {
		return chunk, nil
	}
	s.out = s.out[:0]
	feed := func(ev *sse.Event) error {
		if ev.DataLines == 0 && ev.Name == nil || ev.Incomplete {
			return nil // a blank line or comment; the partial event of a cut stream
		}
		var encErr error
		err := s.dec.decode(ev, func(e Event) {
			if encErr == nil {
				s.out, encErr = s.enc.encode(s.out, e)
			}
		})
		if err == nil {
			err = encErr
		}
		return err
	}
	if err := s.in.Feed(chunk, feed); err != nil {
		s.err = err
		return nil, err
	}
	if endOfStream {
		if err := s.in.Finish(feed); err != nil {
			s.err = err
			return nil, err
		}
		if e, ok := s.dec.(streamEnder); ok {
			if err := s.end(e); err != nil {
				s.err = err
				return nil, err
			}
		}
	}
	return s.out, nil
}

// end calls the decoder's end and encodes what it emits.
func (s *Stream) end(e streamEnder) error {
	var encErr error
	err := e.end(func(ev Event) {
		if encErr == nil {
			s.out, encErr = s.enc.encode(s.out, ev)
		}
	})
	if err == nil {
		err = encErr
	}
	return err
}

// The codecs, one per API; their halves live in <api>_request.go, <api>_response.go
// and <api>_stream.go.
type (
	chatCodec           struct{}
	messagesCodec       struct{}
	responsesCodec      struct{}
	geminiCodec         struct{}
	bedrockCodec        struct{}
	vertexMessagesCodec struct{ messagesCodec }
)
