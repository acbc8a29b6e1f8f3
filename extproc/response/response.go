// Package response is the response side of the gateway's request lifecycle as pure
// functions of bytes: it rewrites the upstream's model id into the public model id in a
// JSON body or in every server-sent event of a stream, reads the upstream-reported token
// usage, estimates the usage of what was delivered when a stream breaks before its usage
// arrives, and classifies unusable upstream responses into the API's error codes.
//
// It knows nothing of protobuf, gRPC or Envoy: the caller (the Envoy adapter and the
// request lifecycle) feeds it body chunks exactly as they arrive, split at any byte, and
// sends on the bytes it returns. Edits are made in place: only the model value (and, when
// the gateway itself asked for stream usage, the usage it caused, and the message of an
// error event inside a stream, which never carries the provider's words) changes; every
// other byte of the upstream's body, including fields this package does not know, is kept.
//
// Shape:
//
//	rw, err := response.New(response.Options{Format: response.OpenAIChat, PublicModel: "demo-chat", Stream: true})
//	out, err := rw.Write(chunk, endOfStream) // per upstream chunk, in order
//	u, ok := rw.Usage()                      // upstream usage, once it came
//	est := rw.Delivered()                    // what reached the client, for a broken stream
//
// Before a body is rewritten, UsableSuccess says whether the upstream's status and content
// type can be sent on as a success; ClassifyUpstream turns anything else (with the error
// body, when there is one) into an apierr.Code, never carrying the provider's message.
//
// Memory per request is bounded: a stream holds only its current partial event (at most
// MaxEventSize), at most textFlushSize bytes of delivered text not yet counted and, for a
// chat stream, the head of its last chunk (at most 1 KB, see chatPrefix); a
// non-streamed body is buffered up to MaxBodySize, except an embeddings or images body
// and any body with Options.Incremental, which is rewritten as it passes (see
// OpenAIEmbeddings) and holds at most its model value and a copy of its usage.
//
// Usage semantics (for pricing): Usage.InputTokens and OutputTokens are every input and
// output token the provider billed; the other counts say how many of them were of each
// priced kind, read from each format's own fields, whose totals differ (see usageTables
// in usage.go: OpenAI's prompt_tokens include cache reads, writes and audio, Anthropic's
// input_tokens exclude both cache counts). ServiceTier is the tier the answer reports.
package response

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/llmgw/gateway/extproc/wire"
)

// Format is the wire format of an upstream response.
type Format int

const (
	// OpenAIChat is an OpenAI Chat Completions response (JSON or chunk stream).
	OpenAIChat Format = iota + 1
	// AnthropicMessages is an Anthropic Messages response (JSON or named-event stream).
	AnthropicMessages
	// OpenAIResponses is an OpenAI Responses response (JSON or typed-event stream).
	OpenAIResponses
	// OpenAIEmbeddings is an OpenAI embeddings response (JSON only), rewritten
	// incrementally: the body is never held, so it can be streamed through at any size.
	OpenAIEmbeddings
	// OpenAIImages is an OpenAI image generation response (JSON only; "data" required; a
	// top-level "model" is rewritten when present; no usage).
	OpenAIImages
	// VideoTask is a video provider's task object (JSON only; "id" required; a top-level
	// "model" is rewritten when present; no usage).
	VideoTask
)

// String returns the format's name.
func (f Format) String() string {
	switch f {
	case OpenAIChat:
		return "openai-chat"
	case AnthropicMessages:
		return "anthropic-messages"
	case OpenAIResponses:
		return "openai-responses"
	case OpenAIEmbeddings:
		return "openai-embeddings"
	case OpenAIImages:
		return "openai-images"
	case VideoTask:
		return "video-task"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Default limits.
const (
	// MaxEventSize bounds a single server-sent event of a stream.
	MaxEventSize = 1 << 20
	// MaxBodySize bounds a non-streamed body.
	MaxBodySize = 16 << 20
	// textFlushSize is how much delivered text is held before it is counted.
	textFlushSize = 64 << 10
)

// Options configure a Rewriter for one response.
type Options struct {
	Format Format
	// PublicModel is the model id the client asked for; it replaces the upstream's model
	// id wherever the format carries one (top-level "model"; Anthropic
	// message_start.message.model; Responses response.model).
	PublicModel string
	// Stream selects a server-sent event stream (true) or one JSON body (false).
	Stream bool
	// ClientWantsUsage is false when the gateway itself added
	// stream_options.include_usage to an OpenAI chat request: the usage-only final chunk
	// is then read but not sent on, and the "usage" members the gateway caused are
	// removed, so the client receives exactly the stream it asked for. It has no effect on
	// other formats.
	ClientWantsUsage bool
	// CountTokens counts the tokens of delivered output text, for Delivered. When nil, a
	// token is estimated as 4 bytes (rounded up).
	CountTokens func(text string) int
	// InputTokens is the caller's own estimate of the prompt's tokens, reported by
	// Delivered when the upstream never said how many input tokens it counted.
	InputTokens int64
	// Incremental rewrites a non-streamed JSON body as its bytes pass instead of holding
	// it whole (see OpenAIEmbeddings): for a body too large, or of unknown size, to be
	// buffered. Only the top-level "model" is rewritten and the top-level "usage" read.
	// Embeddings and images are always rewritten this way.
	Incremental bool
	// MaxEventSize and MaxBodySize override the package limits when > 0.
	MaxEventSize int
	MaxBodySize  int
}

// Usage is a count of tokens: the totals, the priced kinds inside them, and the tier.
type Usage struct {
	// InputTokens counts all input tokens: cache reads and writes, audio and images
	// included.
	InputTokens int64
	// OutputTokens counts all output tokens: reasoning and audio included.
	OutputTokens int64
	// CacheReadInputTokens is the part of InputTokens served from the provider's cache.
	CacheReadInputTokens int64
	// CacheWriteInputTokens is the part of InputTokens written to the provider's cache
	// for the default (5-minute) window; CacheWrite1hInputTokens for an hour.
	CacheWriteInputTokens   int64
	CacheWrite1hInputTokens int64
	// AudioInputTokens and ImageInputTokens are the parts of InputTokens that were
	// audio and images (and neither cache read nor write).
	AudioInputTokens int64
	ImageInputTokens int64
	// AudioOutputTokens is the part of OutputTokens that was audio.
	AudioOutputTokens int64
	// ServiceTier is the service tier the answer reports ("" when it reports none), as
	// the provider names it ("default", "priority", "standard", …).
	ServiceTier string
}

// Rewriter rewrites one upstream response body. It is not safe for concurrent use.
type Rewriter interface {
	// Write takes the next upstream chunk and returns the bytes to send on now: a new
	// slice owned by the caller, possibly empty (a partial event is held until it
	// completes; a non-streamed body is held until endOfStream). endOfStream flushes.
	// After an error, or after endOfStream, every further call returns an error.
	Write(chunk []byte, endOfStream bool) ([]byte, error)
	// Usage is the upstream-reported usage; ok is false if it never came (yet).
	Usage() (u Usage, ok bool)
	// Delivered estimates the usage of what was sent on so far: output text counted with
	// CountTokens; input as the upstream reported it, else Options.InputTokens. It is for
	// settling a response that ended before its usage arrived.
	Delivered() Usage
	// UpstreamModel is the model id the upstream answered with (the first one seen,
	// before it was rewritten to the public id); "" if none came yet.
	UpstreamModel() string
}

// upstreamModel records the first model id an upstream answered with: raw is the JSON
// value that is being replaced (a string; anything else is ignored).
func upstreamModel(seen *string, raw []byte) {
	if *seen != "" || len(raw) < 2 || raw[0] != '"' {
		return
	}
	if s, ok := plainUnquote(raw); ok {
		*seen = s
		return
	}
	if s, err := strconv.Unquote(string(raw)); err == nil {
		*seen = s
	}
}

// plainUnquote is strconv.Unquote of the usual model id, a quoted run of ASCII bytes
// with no quote, backslash or newline inside (Unquote returns those bytes unchanged),
// without its copy of the whole value and UTF-8 check; ok is false for anything else.
func plainUnquote(raw []byte) (string, bool) {
	n := len(raw)
	if n < 2 || raw[0] != '"' || raw[n-1] != '"' {
		return "", false
	}
	b := raw[1 : n-1]
	i := 0
	for ; i+8 <= len(b); i += 8 { // a word at a time (see zeroBytes)
		w := binary.LittleEndian.Uint64(b[i : i+8])
		if (zeroBytes(w^(ones*'"'))|zeroBytes(w^(ones*'\\'))|zeroBytes(w^(ones*'\n'))|w)&highs != 0 {
			return "", false
		}
	}
	for _, c := range b[i:] {
		if c == '"' || c == '\\' || c == '\n' || c >= 0x80 {
			return "", false
		}
	}
	return string(b), true
}

// Errors returned by Write. Map them with errors.Is.
var (
	// ErrUnusable: the upstream body is not a usable response of the format (not JSON,
	// not an object, or missing the format's required member). The caller answers
	// apierr.UpstreamError when it still can.
	ErrUnusable = errors.New("response: upstream body is not a usable response")
	// ErrTooLarge: a non-streamed body or a single event exceeds its limit.
	ErrTooLarge = errors.New("response: upstream body exceeds the size limit")
	// ErrClosed: Write was called after endOfStream or after an error.
	ErrClosed = errors.New("response: write after end of stream")
)

// New returns a Rewriter for opts.
func New(opts Options) (Rewriter, error) {
	switch opts.Format {
	case OpenAIChat, AnthropicMessages, OpenAIResponses:
	case OpenAIEmbeddings, OpenAIImages, VideoTask:
		if opts.Stream {
			return nil, fmt.Errorf("response: %v has no stream", opts.Format)
		}
	default:
		return nil, fmt.Errorf("response: unknown format %v", opts.Format)
	}
	if opts.PublicModel == "" {
		return nil, errors.New("response: empty public model")
	}
	if opts.MaxEventSize <= 0 {
		opts.MaxEventSize = MaxEventSize
	}
	if opts.MaxBodySize <= 0 {
		opts.MaxBodySize = MaxBodySize
	}
	c := counter{count: opts.CountTokens}
	if opts.Stream {
		return newStream(opts, c)
	}
	model, err := quote(opts.PublicModel)
	if err != nil {
		return nil, err
	}
	if opts.Incremental || opts.Format == OpenAIEmbeddings || opts.Format == OpenAIImages {
		return newIncremental(opts, model), nil
	}
	return &bodyRewriter{opts: opts, model: model, counter: c}, nil
}

// quote returns s as a JSON string.
func quote(s string) ([]byte, error) {
	return appendQuote(make([]byte, 0, len(s)+2), s)
}

// appendQuote appends s as a JSON string to dst.
func appendQuote(dst []byte, s string) ([]byte, error) {
	q, err := wire.AppendQuote(dst, s)
	if err != nil {
		return nil, fmt.Errorf("response: public model: %w", err)
	}
	return q, nil
}

// counter counts delivered output text in batches, holding at most textFlushSize bytes.
type counter struct {
	count   func(string) int
	text    []byte
	counted int64
}

func (c *counter) add(quoted []byte) {
	t, ok := appendUnquoted(c.text, quoted)
	setSlice(&c.text, t)
	if !ok {
		return
	}
	if len(c.text) >= textFlushSize {
		c.flush()
	}
}

func (c *counter) addRaw(b []byte) {
	c.text = append(c.text, b...)
	if len(c.text) >= textFlushSize {
		c.flush()
	}
}

func (c *counter) flush() {
	if len(c.text) == 0 {
		return
	}
	if c.count != nil {
		c.counted += int64(c.count(string(c.text)))
	} else {
		c.counted += int64((len(c.text) + 3) / 4)
	}
	c.text = c.text[:0]
}

func (c *counter) tokens() int64 {
	c.flush()
	return c.counted
}

// edit replaces data[start:end] with what repl names. It holds no pointer, so that
// recording one (a stream records some in every chunk) costs no GC write barrier.
type edit struct {
	start, end int
	repl       replacement
}

// replacement names what an edit puts in place of the bytes it replaces.
type replacement uint8

const (
	removeBytes      replacement = iota // nothing: the bytes are removed
	publicModel                         // the public model id (JSON)
	streamErrorWords                    // streamErrorMessage
)

// bytes returns the replacement's bytes; model is the public model id (JSON).
func (k replacement) bytes(model []byte) []byte {
	switch k {
	case publicModel:
		return model
	case streamErrorWords:
		return streamErrorMessage
	}
	return nil
}

// appendEdited appends data with the edits (sorted, not overlapping) applied; model is
// the public model id (JSON).
func appendEdited(dst, data []byte, edits []edit, model []byte) []byte {
	return appendEditedAt(dst, data, 0, edits, model)
}

// appendEditedAt appends raw with the edits applied, whose offsets are relative to
// raw[off:]: an event's data edited with the bytes around it in as few copies as there
// are stretches between edits (each copy is a call), a removal adding none.
func appendEditedAt(dst, raw []byte, off int, edits []edit, model []byte) []byte {
	at := 0
	for _, e := range edits {
		dst = append(dst, raw[at:off+e.start]...)
		if b := e.repl.bytes(model); len(b) > 0 {
			dst = append(dst, b...)
		}
		at = off + e.end
	}
	return append(dst, raw[at:]...)
}

// setSlice sets *dst to s, which was appended to *dst: when the append did not move the
// bytes, only the length is stored. Storing the pointer too would cost a write barrier
// whenever the collector is marking, and a stream does this in nearly every chunk into
// its rewriter, which lives on the heap.
func setSlice[E any](dst *[]E, s []E) {
	if cap(s) == cap(*dst) {
		*dst = (*dst)[:len(s)]
	} else {
		*dst = s
	}
}

// addEdit inserts e keeping edits sorted by start.
func addEdit(edits []edit, e edit) []edit {
	edits = append(edits, e)
	for i := len(edits) - 1; i > 0 && edits[i].start < edits[i-1].start; i-- {
		edits[i], edits[i-1] = edits[i-1], edits[i]
	}
	return edits
}
