package response

import (
	"bytes"
	"errors"

	"github.com/llmgw/gateway/extproc/sse"
)

// streamRewriter rewrites a server-sent event stream event by event.
type streamRewriter struct {
	opts     Options
	model    []byte
	upstream string       // the first upstream model id seen
	dec      *sse.Decoder // made for the first chunk that dataEvents does not take whole
	counter

	out     []byte   // output of the current Write
	grow    int      // what the last model replacement added to its event (before one: the model)
	ms      []member // scratch: top-level members of the current event (not for chat)
	edits   []edit   // scratch: edits of the current event
	scratch []byte   // scratch: edited data of a multi-line event
	drop    bool     // the current event is not sent on
	// chat: a delta object was walked since the walk after a chunk's first delta began
	// (that stretch then counted text: no tail is recorded; see chatTail)
	otherDelta bool
	prefix     chatPrefix

	usage   Usage
	usageOK bool
	// Anthropic: usage from message_start, merged with message_delta.
	anth anthropicUsage
	// input tokens the upstream reported before the end (Anthropic message_start).
	inputKnown bool
	// tier is the service tier the stream reports at its top (OpenAI chat chunks, the
	// Responses response object).
	tier string

	closed bool
	err    error

	editBuf [2]edit
	textBuf [152]byte // the first delivered text, before it outgrows this (fills the size class)
}

// newStream returns a stream rewriter in one allocation (with its first edits, first
// text, chat head and, when it leaves most of textBuf to text, the public model's JSON at
// textBuf's end): a short stream allocates little more than its output.
func newStream(opts Options, c counter) (*streamRewriter, error) {
	if opts.MaxEventSize <= 0 {
		opts.MaxEventSize = MaxEventSize
	}
	r := &streamRewriter{opts: opts, counter: c}
	r.edits = r.editBuf[:0]
	// The text is capped below the model's bytes, so that appending to it never
	// overwrites them (it moves to the heap instead).
	keep := len(r.textBuf)
	if n := len(opts.PublicModel) + 2; n <= len(r.textBuf)/2 {
		keep -= n
	}
	model, err := appendQuote(r.textBuf[keep:keep], opts.PublicModel)
	if err != nil {
		return nil, err
	}
	r.model = model
	r.grow = len(model)
	r.text = r.textBuf[:0:keep]
	return r, nil
}

func (r *streamRewriter) Write(chunk []byte, endOfStream bool) ([]byte, error) {
	if r.err != nil || r.closed || r.dec != nil || !frameDataEvents {
		return r.write(chunk, endOfStream)
	}
	// The usual chunk, whole data events with no decoder made yet: write without the
	// general path's steps for held bytes (a call per chunk costs as much as they do).
	n := len(chunk)
	if n > 0 {
		n += r.grow
	}
	out, k := r.dataEvents(make([]byte, 0, n), chunk) // no allocation at an empty end of stream
	if k < len(chunk) {
		return r.decode(out, chunk[k:], endOfStream)
	}
	r.closed = endOfStream
	return out, nil
}

// write is Write for any chunk in any state.
func (r *streamRewriter) write(chunk []byte, endOfStream bool) ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.closed {
		return nil, ErrClosed
	}
	held := r.held()
	n := len(chunk) + held
	if n > 0 {
		n += r.grow
	}
	out := make([]byte, 0, n) // no allocation at an empty end of stream
	if held == 0 && frameDataEvents {
		var k int
		out, k = r.dataEvents(out, chunk)
		chunk = chunk[k:]
	}
	if len(chunk) > 0 || held > 0 {
		return r.decode(out, chunk, endOfStream)
	}
	r.closed = endOfStream
	return out, nil
}

// decode hands chunk to the decoder, appending what it completes to out.
func (r *streamRewriter) decode(out, chunk []byte, endOfStream bool) ([]byte, error) {
	if r.dec == nil {
		r.dec = sse.NewDecoder(r.opts.MaxEventSize)
	}
	r.out = out
	err := r.dec.Feed(chunk, r.emit) // the decoder keeps no emit: no allocation
	if err == nil && endOfStream {
		err = r.dec.Finish(r.emit)
	}
	out = r.out
	r.out = nil
	r.closed = endOfStream
	if err != nil {
		if errors.Is(err, sse.ErrEventTooLarge) {
			err = ErrTooLarge
		}
		r.err = err
		// What was complete before the failure is still sent on.
		return out, err
	}
	return out, nil
}

// held reports how many bytes of an incomplete event the stream holds.
func (r *streamRewriter) held() int {
	if r.dec == nil {
		return 0
	}
	return r.dec.Buffered()
}

func (r *streamRewriter) Usage() (Usage, bool) {
	if !r.usageOK {
		return Usage{}, false
	}
	u := r.usage
	if u.ServiceTier == "" {
		u.ServiceTier = r.tier
	}
	return u, r.usageOK
}

func (r *streamRewriter) Delivered() Usage {
	u := Usage{InputTokens: r.opts.InputTokens, ServiceTier: r.tier}
	if r.inputKnown {
		u = r.anth.usage() // its input parts, as message_start reported them
	}
	u.OutputTokens, u.AudioOutputTokens = r.tokens(), 0
	return u
}

var done = []byte("[DONE]")

// frameDataEvents lets Write hand the decoder only what dataEvents does not take (tests
// turn it off to compare with the decoder alone).
var frameDataEvents = true

// dataEvents rewrites the events at the start of chunk that are one "data" line and a
// blank line, each ended by "\n" (what upstreams send), without the decoder, which
// must hold nothing: it hands each event out the way the decoder would and stops
// at anything else (another field, a comment, a "\r", an event over the size limit or
// one the chunk does not complete), returning how many bytes of chunk it consumed.
func (r *streamRewriter) dataEvents(out, chunk []byte) ([]byte, int) {
	k := 0
	for {
		p := chunk[k:]
		if len(p) < len("data:\n\n") || string(p[:5]) != "data:" {
			return out, k
		}
		nl := bytes.IndexByte(p, '\n')
		if nl < 0 || nl+1 >= len(p) || p[nl+1] != '\n' || nl+2 > r.opts.MaxEventSize ||
			bytes.IndexByte(p[:nl], '\r') >= 0 {
			return out, k
		}
		ds := 5
		if p[ds] == ' ' {
			ds++
		}
		out = r.appendEvent(out, p[:nl+2], ds, nl, false)
		k += nl + 2
	}
}

// emit rewrites one event from the decoder into r.out.
func (r *streamRewriter) emit(ev *sse.Event) error {
	if s, e, single := ev.DataSpan(); single {
		r.out = r.appendEvent(r.out, ev.Raw, s, e, ev.Incomplete)
		return nil
	}
	if ev.DataLines == 0 || string(ev.Data) == string(done) {
		r.out = append(r.out, ev.Raw...)
		return nil
	}
	// Several data lines.
	switch ok := r.event(ev.Data); {
	case !ok:
		if !ev.Incomplete {
			r.out = append(r.out, ev.Raw...)
		}
	case r.drop:
	case len(r.edits) == 0:
		r.out = append(r.out, ev.Raw...)
	default:
		r.scratch = appendEdited(r.scratch[:0], ev.Data, r.edits, r.model)
		r.out = ev.AppendWithData(r.out, r.scratch)
	}
	return nil
}

// appendEvent appends the event raw, whose only data line's value is raw[ds:de],
// rewritten, to out.
func (r *streamRewriter) appendEvent(out, raw []byte, ds, de int, incomplete bool) []byte {
	data := raw[ds:de]
	if string(data) == string(done) {
		return append(out, raw...)
	}
	switch ok := r.event(data); {
	case !ok:
		// Not a JSON object: a complete event passes unchanged; the truncated tail of a
		// stream that ended mid-event is not sent on.
		if incomplete {
			return out
		}
		return append(out, raw...)
	case r.drop:
		return out
	case len(r.edits) == 0:
		return append(out, raw...)
	}
	return appendEditedAt(out, raw, ds, r.edits, r.model)
}

// event reads the data of one event in the stream's format, recording its edits; ok is
// false when it is not a JSON object.
func (r *streamRewriter) event(data []byte) bool {
	r.edits = r.edits[:0]
	r.drop = false
	switch r.opts.Format {
	case OpenAIChat:
		return r.chat(data)
	case AnthropicMessages:
		return r.anthropic(data)
	case OpenAIResponses:
		return r.responses(data)
	}
	return false
}

// streamErrorMessage replaces the provider's words in an error event inside a stream
// (the provider's message never reaches the client; the event's type and code stay).
var streamErrorMessage = []byte(`"The upstream provider failed while streaming."`)

// replaceMessage replaces the "message" of the error object at data[start:end].
func (r *streamRewriter) replaceMessage(data []byte, start, end int) {
	if s, e, ok := lookup(data[start:end], "message"); ok {
		setSlice(&r.edits, addEdit(r.edits, edit{start + s, start + e, streamErrorWords}))
	}
}

func (r *streamRewriter) replace(data []byte, start, end int) {
	upstreamModel(&r.upstream, data[start:end])
	r.grow = max(len(r.model)-(end-start), 0)
	setSlice(&r.edits, addEdit(r.edits, edit{start, end, publicModel}))
}

func (r *streamRewriter) UpstreamModel() string { return r.upstream }

// toolCallArgs counts the arguments of tool_calls[].function.
func (r *streamRewriter) toolCallArgs(v []byte) {
	eachElement(v, func(s, e int) bool {
		if fn, ok := get(v[s:e], "function"); ok {
			if args, ok := get(fn, "arguments"); ok {
				r.add(args)
			}
		}
		return true
	})
}

// anthropic handles one Messages stream event.
func (r *streamRewriter) anthropic(data []byte) bool {
	var ok bool
	if r.ms, ok = scanObject(data, r.ms[:0]); !ok {
		return false
	}
	t, _ := find(r.ms, "type")
	switch string(data[t.valStart:t.valEnd]) {
	case `"message_start"`:
		m, ok := find(r.ms, "message")
		if !ok {
			break
		}
		msg := data[m.valStart:m.valEnd]
		if s, e, ok := lookup(msg, "model"); ok {
			r.replace(data, m.valStart+s, m.valStart+e)
		}
		if u, ok := get(msg, "usage"); ok && !isNull(u) {
			r.anth.merge(u)
			r.inputKnown = true
		}
	case `"error"`:
		if m, ok := find(r.ms, "error"); ok {
			r.replaceMessage(data, m.valStart, m.valEnd)
		}
	case `"message_delta"`:
		if m, ok := find(r.ms, "usage"); ok && !isNull(data[m.valStart:m.valEnd]) {
			r.anth.merge(data[m.valStart:m.valEnd])
			r.usage, r.usageOK = r.anth.usage(), true
		}
	case `"content_block_delta"`:
		m, ok := find(r.ms, "delta")
		if !ok {
			break
		}
		delta := data[m.valStart:m.valEnd]
		dt, _ := get(delta, "type")
		var field string
		switch string(dt) {
		case `"text_delta"`:
			field = "text"
		case `"input_json_delta"`:
			field = "partial_json"
		case `"thinking_delta"`:
			field = "thinking"
		default:
			return true
		}
		if v, ok := get(delta, field); ok {
			r.add(v)
		}
	}
	return true
}

var responseObjectKeys = []string{"usage", "service_tier"}

// responses handles one Responses stream event.
func (r *streamRewriter) responses(data []byte) bool {
	var ok bool
	if r.ms, ok = scanObject(data, r.ms[:0]); !ok {
		return false
	}
	if m, ok := find(r.ms, "response"); ok {
		resp := data[m.valStart:m.valEnd]
		if s, e, ok := lookup(resp, "model"); ok {
			r.replace(data, m.valStart+s, m.valStart+e)
		}
		var m [2][]byte
		getAll(resp, responseObjectKeys, m[:])
		noteTier(&r.tier, m[1])
		if u := m[0]; u != nil && !isNull(u) {
			if u, ok := readResponsesUsage(u); ok {
				r.usage, r.usageOK = u, true
			}
		}
	}
	t, _ := find(r.ms, "type")
	switch string(data[t.valStart:t.valEnd]) {
	case `"error"`:
		if m, ok := find(r.ms, "message"); ok {
			r.edits = addEdit(r.edits, edit{m.valStart, m.valEnd, streamErrorWords})
		}
	case `"response.failed"`:
		if m, ok := find(r.ms, "response"); ok {
			if s, e, ok := lookup(data[m.valStart:m.valEnd], "error"); ok {
				r.replaceMessage(data, m.valStart+s, m.valStart+e)
			}
		}
	case `"response.output_text.delta"`, `"response.refusal.delta"`,
		`"response.function_call_arguments.delta"`:
		if m, ok := find(r.ms, "delta"); ok {
			r.add(data[m.valStart:m.valEnd])
		}
	}
	return true
}
