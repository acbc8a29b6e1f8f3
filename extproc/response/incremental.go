package response

// incrementalRewriter rewrites one JSON object body as its bytes arrive, without holding
// the body: it walks the top-level members with a small state machine, passes every byte
// through at once except the value of the top-level "model" member (held until it ends,
// then replaced by the public model id), and keeps a bounded copy of the top-level "usage"
// value to read at the end. Memory per response is bounded by MaxEventSize (the held model
// value) plus maxUsageCopy, whatever the body's size, so the caller can ask Envoy for the
// body in STREAMED mode.
//
// It serves OpenAI embeddings, whose "data" member can be many megabytes and whose "model"
// and "usage" come after it, images, and (Options.Incremental) chat, messages and
// responses bodies too large or of unknown size, usage read in each format's shape. Structure is checked as far as the rewrite needs (strings,
// brackets, separators); a body that is not one JSON object, or lacks the format's
// required member, fails with ErrUnusable at the point it is detected, after the bytes
// already returned.
type incrementalRewriter struct {
	opts     Options
	model    []byte
	upstream string // the first upstream model id seen

	st       int
	key      []byte // the current top-level key (escapes not decoded), up to maxKeyLen
	keyLong  bool
	keyEsc   bool
	depth    int  // nesting inside the current value
	inStr    bool // inside a string of the current value
	esc      bool
	scalar   bool // the current value is a number or literal
	hold     bool // the current value is the model: held in held
	held     []byte
	capture  bool   // the current value is the usage: copied into usageCp
	tierCp   []byte // the current value is the service tier (capture off): copied here, bounded
	inTier   bool
	usageCp  []byte
	usageBig bool

	sawRequired bool
	// inRequired: the current value is the required member's; requiredFilled: that
	// value is not an empty array (an images response with "data": [] holds no image).
	inRequired, requiredFilled bool
	usage                      Usage
	usageOK                    bool
	tier                       string // the service tier the body reports at its top
	closed                     bool
	err                        error
}

const (
	maxKeyLen    = 64
	maxUsageCopy = 64 << 10
	// maxTierCopy bounds the copy of a service tier value (a short name).
	maxTierCopy = 64
)

const (
	stStart = iota
	stKeyOrEnd
	stKeyStart
	stKey
	stColon
	stValueStart
	stValue
	stCommaOrEnd
	stTrail
)

func newIncremental(opts Options, model []byte) *incrementalRewriter {
	return &incrementalRewriter{opts: opts, model: model, key: make([]byte, 0, maxKeyLen)}
}

func (r *incrementalRewriter) Usage() (Usage, bool) {
	if !r.usageOK {
		return Usage{}, false
	}
	u := r.usage
	if u.ServiceTier == "" {
		u.ServiceTier = r.tier
	}
	return u, r.usageOK
}

func (r *incrementalRewriter) UpstreamModel() string { return r.upstream }

// Delivered has no output text to count: it reports the usage when it came, else the
// caller's input estimate.
func (r *incrementalRewriter) Delivered() Usage {
	if r.usageOK {
		return r.usage
	}
	return Usage{InputTokens: r.opts.InputTokens}
}

func (r *incrementalRewriter) Write(chunk []byte, endOfStream bool) ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.closed {
		return nil, ErrClosed
	}
	out := make([]byte, 0, len(chunk)+len(r.model))
	run := 0 // start of the bytes of chunk not yet copied to out
	fail := func(err error, i int) ([]byte, error) {
		r.err = err
		if i > run && !r.hold {
			out = append(out, chunk[run:i]...)
		}
		return out, err
	}
	for i := 0; i < len(chunk); i++ {
		c := chunk[i]
		switch r.st {
		case stStart, stKeyOrEnd, stKeyStart, stColon, stCommaOrEnd, stTrail:
			if isSpace(c) {
				continue
			}
			switch {
			case r.st == stStart && c == '{':
				r.st = stKeyOrEnd
			case (r.st == stKeyOrEnd || r.st == stKeyStart) && c == '"':
				r.st, r.key, r.keyLong, r.keyEsc = stKey, r.key[:0], false, false
			case (r.st == stKeyOrEnd || r.st == stCommaOrEnd) && c == '}':
				r.st = stTrail
			case r.st == stColon && c == ':':
				r.st = stValueStart
			case r.st == stCommaOrEnd && c == ',':
				r.st = stKeyStart
			default:
				return fail(ErrUnusable, i)
			}
		case stKey:
			switch {
			case r.keyEsc:
				r.keyEsc = false
			case c == '\\':
				r.keyEsc = true
			case c == '"':
				r.st = stColon
				continue
			}
			if len(r.key) < maxKeyLen {
				r.key = append(r.key, c)
			} else {
				r.keyLong = true
			}
		case stValueStart:
			if isSpace(c) {
				continue
			}
			if c == ',' || c == '}' || c == ']' || c == ':' {
				return fail(ErrUnusable, i)
			}
			k := string(r.key)
			if r.keyLong {
				k = ""
			}
			r.depth, r.inStr, r.esc, r.scalar = 0, false, false, false
			r.hold = k == "model"
			r.capture = k == "usage"
			r.inTier = k == "service_tier"
			r.tierCp = r.tierCp[:0]
			r.inRequired = k == required(r.opts.Format)
			if r.inRequired {
				r.sawRequired = true
				r.requiredFilled = c != '['
			}
			if r.hold {
				out = append(out, chunk[run:i]...)
				run = i
				r.held = r.held[:0]
			}
			if r.capture {
				r.usageCp, r.usageBig = r.usageCp[:0], false
			}
			r.st = stValue
			switch c {
			case '"':
				r.inStr = true
			case '{', '[':
				r.depth = 1
			default:
				r.scalar = true
			}
			r.keep(c)
		case stValue:
			if r.scalar {
				if c == ',' || c == '}' || isSpace(c) {
					r.endValue(&out, chunk, &run, i)
					i-- // the delimiter is read again in stCommaOrEnd
					continue
				}
				r.keep(c)
				break
			}
			r.keep(c)
			if r.inRequired && r.depth == 1 && !r.inStr && !isSpace(c) && c != ']' {
				r.requiredFilled = true
			}
			switch {
			case r.esc:
				r.esc = false
			case r.inStr:
				if c == '\\' {
					r.esc = true
				} else if c == '"' {
					r.inStr = false
					if r.depth == 0 {
						r.endValue(&out, chunk, &run, i+1)
					}
				}
			case c == '"':
				r.inStr = true
			case c == '{' || c == '[':
				r.depth++
			case c == '}' || c == ']':
				r.depth--
				if r.depth == 0 {
					r.endValue(&out, chunk, &run, i+1)
				}
			}
			if r.hold && len(r.held) > r.opts.MaxEventSize {
				return fail(ErrTooLarge, i)
			}
		}
	}
	if !r.hold {
		out = append(out, chunk[run:]...)
	}
	if endOfStream {
		r.closed = true
		if r.st == stValue && r.scalar {
			r.endValue(&out, chunk, &run, len(chunk))
		}
		if r.st != stTrail || !r.sawRequired {
			r.err = ErrUnusable
			return out, r.err
		}
	}
	return out, nil
}

// keep records a byte of the current value where it is held or copied.
func (r *incrementalRewriter) keep(c byte) {
	if r.hold {
		r.held = append(r.held, c)
	}
	if r.inTier && len(r.tierCp) < maxTierCopy {
		r.tierCp = append(r.tierCp, c)
	}
	if r.capture && !r.usageBig {
		if len(r.usageCp) >= maxUsageCopy {
			r.usageBig = true
		} else {
			r.usageCp = append(r.usageCp, c)
		}
	}
}

// endValue finishes the value that ends just before chunk[end]: a held model value is
// replaced (a string by the public model, anything else sent as it was), a copied usage
// value is read.
func (r *incrementalRewriter) endValue(out *[]byte, chunk []byte, run *int, end int) {
	r.st = stCommaOrEnd
	if r.hold {
		r.hold = false
		if len(r.held) > 0 && r.held[0] == '"' {
			upstreamModel(&r.upstream, r.held)
			*out = append(*out, r.model...)
		} else {
			*out = append(*out, r.held...)
		}
		*run = end
	}
	if r.inTier {
		r.inTier = false
		noteTier(&r.tier, r.tierCp)
	}
	if r.capture {
		r.capture = false
		if !r.usageBig && !isNull(r.usageCp) {
			r.usage, r.usageOK = readBodyUsage(r.opts.Format, r.usageCp)
		}
	}
}

// RequiredFilled reports whether the body's required member (an images response's
// "data") held anything: false for an empty array.
func (r *incrementalRewriter) RequiredFilled() bool { return r.sawRequired && r.requiredFilled }
