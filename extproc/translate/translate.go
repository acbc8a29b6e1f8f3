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

// codec is one API's six halves. Decoders read the API's wire bytes into the neutral
// model; encoders write it. A request decoder refuses with *Unsupported what the neutral
// model cannot carry; a request encoder refuses what its API cannot honour.
type codec interface {
	decodeRequest(body []byte) (*Request, error)
	encodeRequest(r *Request, o RequestOptions) ([]byte, error)
	decodeResponse(body []byte) (*Response, error)
	encodeResponse(r *Response, o ResponseOptions) ([]byte, error)
	newStreamDecoder() streamDecoder
	newStreamEncoder(o ResponseOptions) streamEncoder
}

// streamDecoder turns one upstream server-sent event into neutral events.
type streamDecoder interface {
	decode(ev *sse.Event, emit func(Event)) error
}

// streamEncoder appends the client's bytes for one neutral event to dst.
type streamEncoder interface {
	encode(dst []byte, e Event) ([]byte, error)
}

// codecs is the table of APIs: adding an API is one entry here and one codec.
var codecs = map[API]codec{
	Chat:      chatCodec{},
	Messages:  messagesCodec{},
	Responses: responsesCodec{},
}

// Translator translates between a client API and an upstream API.
type Translator struct {
	client, upstream           API
	clientCodec, upstreamCodec codec
}

// New returns the translator for a client speaking client and a channel serving
// upstream; ok is false when they are the same API (no translation) or either is not a
// chat API.
func New(client, upstream API) (t *Translator, ok bool) {
	c, ok1 := codecs[client]
	u, ok2 := codecs[upstream]
	if !ok1 || !ok2 || client == upstream {
		return nil, false
	}
	return &Translator{client, upstream, c, u}, true
}

// Client is the client's API.
func (t *Translator) Client() API { return t.client }

// Upstream is the upstream's API.
func (t *Translator) Upstream() API { return t.upstream }

// Request translates the client's request body into the upstream's. The error is an
// *Unsupported when a field cannot be carried over.
func (t *Translator) Request(body []byte, o RequestOptions) ([]byte, error) {
	r, err := t.clientCodec.decodeRequest(body)
	if err != nil {
		return nil, err
	}
	return t.upstreamCodec.encodeRequest(r, o)
}

// Response translates a complete successful upstream body into the client's.
func (t *Translator) Response(body []byte, o ResponseOptions) ([]byte, error) {
	r, err := t.upstreamCodec.decodeResponse(body)
	if err != nil {
		return nil, err
	}
	return t.clientCodec.encodeResponse(r, o)
}

// Stream returns a translator of one upstream stream into the client's.
func (t *Translator) Stream(o ResponseOptions) *Stream {
	return &Stream{
		in:  sse.NewDecoder(0),
		dec: t.upstreamCodec.newStreamDecoder(),
		enc: t.clientCodec.newStreamEncoder(o),
	}
}

// Stream translates one upstream event stream, fed in chunks split at any byte. Not
// safe for concurrent use.
type Stream struct {
	in  *sse.Decoder
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
	}
	return s.out, nil
}

// The codecs, one per API; their halves live in <api>_request.go, <api>_response.go
// and <api>_stream.go.
type (
	chatCodec      struct{}
	messagesCodec  struct{}
	responsesCodec struct{}
)
