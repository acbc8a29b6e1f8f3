package response

import (
	"github.com/tidwall/gjson"
)

// bodyRewriter rewrites one non-streamed JSON body, buffered until the end of the stream.
type bodyRewriter struct {
	opts     Options
	model    []byte
	upstream string // the first upstream model id seen
	counter

	buf     []byte
	usage   Usage
	usageOK bool
	sent    bool
	closed  bool
	err     error
}

// required is the member every usable body of the format has.
func required(f Format) string {
	switch f {
	case OpenAIChat:
		return "choices"
	case AnthropicMessages:
		return "content"
	case OpenAIResponses:
		return "output"
	case VideoTask:
		return "id"
	default:
		return "data"
	}
}

func (r *bodyRewriter) Write(chunk []byte, endOfStream bool) ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.closed {
		return nil, ErrClosed
	}
	if len(r.buf)+len(chunk) > r.opts.MaxBodySize {
		r.err, r.buf = ErrTooLarge, nil
		return nil, r.err
	}
	r.buf = append(r.buf, chunk...)
	if !endOfStream {
		return []byte{}, nil
	}
	r.closed = true
	out, err := r.finish(r.buf)
	r.buf = nil
	if err != nil {
		r.err = err
		return nil, err
	}
	return out, nil
}

func (r *bodyRewriter) finish(body []byte) ([]byte, error) {
	var top [16]member // an answer's top-level members, on the stack unless there are more
	ms, ok := scanObject(body, top[:0])
	if !ok {
		return nil, ErrUnusable
	}
	if _, ok := find(ms, required(r.opts.Format)); !ok {
		return nil, ErrUnusable
	}
	var edits []edit
	if m, ok := find(ms, "model"); ok {
		upstreamModel(&r.upstream, body[m.valStart:m.valEnd])
		edits = append(edits, edit{m.valStart, m.valEnd, publicModel})
	}
	if m, ok := find(ms, "usage"); ok && !isNull(body[m.valStart:m.valEnd]) {
		r.usage, r.usageOK = readBodyUsage(r.opts.Format, body[m.valStart:m.valEnd])
	}
	if m, ok := find(ms, "service_tier"); ok && r.usageOK && r.usage.ServiceTier == "" {
		noteTier(&r.usage.ServiceTier, body[m.valStart:m.valEnd])
	}
	r.countOutput(body)
	r.sent = true
	return appendEdited(make([]byte, 0, len(body)+len(r.model)), body, edits, r.model), nil
}

// countOutput feeds the body's output text to the counter, for Delivered when the body
// carried no usage.
func (r *bodyRewriter) countOutput(body []byte) {
	if r.usageOK {
		return
	}
	var paths []string
	switch r.opts.Format {
	case OpenAIChat:
		paths = []string{"choices.#.message.content", "choices.#.message.refusal",
			"choices.#.message.tool_calls.#.function.arguments"}
	case AnthropicMessages:
		paths = []string{"content.#.text", "content.#.thinking", `content.#(type=="tool_use")#.input`}
	case OpenAIResponses:
		paths = []string{"output.#.content.#.text", "output.#.content.#.refusal", "output.#.arguments"}
	}
	for _, p := range paths {
		r.addResult(gjson.GetBytes(body, p))
	}
}

func (r *bodyRewriter) addResult(v gjson.Result) {
	switch {
	case v.IsArray():
		for _, e := range v.Array() {
			r.addResult(e)
		}
	case v.Type == gjson.String:
		r.addRaw([]byte(v.Str))
	case v.IsObject():
		r.addRaw([]byte(v.Raw))
	}
}

func (r *bodyRewriter) Usage() (Usage, bool) { return r.usage, r.usageOK }

func (r *bodyRewriter) UpstreamModel() string { return r.upstream }

func (r *bodyRewriter) Delivered() Usage {
	if r.usageOK {
		return r.usage
	}
	u := Usage{InputTokens: r.opts.InputTokens}
	if r.sent {
		u.OutputTokens = r.tokens()
	}
	return u
}
