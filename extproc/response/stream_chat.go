package response

// chat handles one chat.completion.chunk in one pass over its bytes, with no callbacks:
// the top-level object is walked member by member (a "model" value is replaced, "usage"
// is read, an "error" loses its message); "choices" is walked down to each choice's
// "delta", whose content, refusal and tool call arguments are counted; every other value
// is skipped. ok is false when data is not one object (surrounding space allowed); the
// grammar checked is the scanner's (strings, brackets, separators, not the grammar of
// numbers and literals).
//
// When data starts like the last chunk that reached "choices", the walk resumes there
// (see chatPrefix).
func (r *streamRewriter) chat(data []byte) bool {
	var usageKey, usageStart, usageEnd, usagePrev int
	hasUsage, choicesEmpty, choicesSeen := false, true, false
	prevEnd := -1
	var i int
	var more, ok, resumed bool
	p := &r.prefix
	p.armed = false
	var tw chatTailWalk
	switch p.match(data) {
	case atDelta:
		// The choices value is walked from its first delta's first key on; what precedes
		// that key made no edit and counted nothing, and the choices value is not empty.
		setSlice(&r.edits, append(r.edits, p.edits[:p.nEdits]...))
		var d int
		if d, ok = r.chatDeltaFrom(data, len(p.bytes)-1, true, true); !ok {
			return false
		}
		choicesSeen, choicesEmpty, resumed = true, false, true
		if t := p.tail; p.tailMatches(data, d) {
			i, more = d+int(t.n)-1, true
			prevEnd = d + int(t.prevEnd)
			if t.hasUsage {
				hasUsage = true
				usageKey, usageStart = d+int(t.usageKey), d+int(t.usageStart)
				usageEnd, usagePrev = d+int(t.usageEnd), d+int(t.usagePrev)
			}
			break
		}
		r.otherDelta = false
		var ve int
		if ve, ok = r.chatAfterDelta(data, d); !ok {
			return false
		}
		tw.d, tw.on = d, !r.otherDelta
		prevEnd = ve
		i, more, ok = nextMember(data, ve, '}')
	case atChoices:
		i, more, ok, resumed = int(p.short)-1, true, true, true
		prevEnd = int(p.prevEnd)
		setSlice(&r.edits, append(r.edits, p.edits[:p.nEdits]...))
	default:
		i, more, ok = openContainer(data, skipSpace(data, 0), '{', '}')
	}
	for ok && more {
		if tw.on {
			tw.note(i, prevEnd, hasUsage, usageKey, usageStart, usageEnd, usagePrev)
		}
		var key []byte
		var ks, vs, ve int
		if key, ks, vs, ok = memberHead(data, i); !ok {
			return false
		}
		switch string(key) {
		case "model":
			tw.on = false
			if ve, ok = valueEnd(data, vs); ok {
				r.replace(data, vs, ve)
			}
		case "choices":
			tw.on = false
			if !choicesSeen && !hasUsage {
				// Resumed here (at the recorded key) or recorded now: the walk may record
				// the longer prefix, through its first delta's first key.
				p.armed = resumed || p.record(data, ks, prevEnd, r.edits)
			}
			choicesSeen = true
			ve, ok = r.chatChoices(data, vs)
			p.armed = false
			choicesEmpty = ok && isEmptyArray(data[vs:ve])
		case "usage":
			ve, ok = valueEnd(data, vs)
			usageKey, usageStart, usageEnd, usagePrev, hasUsage = ks, vs, ve, prevEnd, true
			tw.on = tw.on && ok && isNull(data[vs:ve])
		case "error":
			tw.on = false
			if ve, ok = valueEnd(data, vs); ok {
				r.replaceMessage(data, vs, ve)
			}
		case "service_tier":
			// Every chunk repeats it: a resumed walk that skips it skips the same value.
			if ve, ok = valueEnd(data, vs); ok {
				noteTier(&r.tier, data[vs:ve])
			}
		default:
			ve, ok = valueEnd(data, vs)
		}
		if !ok {
			return false
		}
		prevEnd = ve
		i, more, ok = nextMember(data, ve, '}')
	}
	if !ok || skipSpace(data, i) != len(data) {
		return false
	}
	if tw.last.n > 0 {
		p.recordTail(data, &tw)
	}
	if hasUsage {
		r.chatUsage(data, usageKey, usageStart, usageEnd, usagePrev, choicesEmpty)
	}
	return true
}

// chatUsage reads the top-level usage member of a well-formed chunk and removes it, or
// drops the whole chunk, when the gateway asked for it and the client did not.
func (r *streamRewriter) chatUsage(data []byte, key, start, end, prev int, choicesEmpty bool) {
	v := data[start:end]
	remove := false
	if isNull(v) {
		remove = !r.opts.ClientWantsUsage
	} else {
		if u, ok := readOpenAIUsage(v); ok {
			r.usage, r.usageOK = u, true
		}
		if !r.opts.ClientWantsUsage {
			r.drop = choicesEmpty
			remove = !choicesEmpty
		}
	}
	if remove {
		s, e := removalAt(data, key, end, prev)
		setSlice(&r.edits, addEdit(r.edits, edit{s, e, removeBytes}))
	}
}

// chatChoices walks the choices value at data[i] (an array of choice objects, or else any
// value, skipped) and returns its end.
func (r *streamRewriter) chatChoices(data []byte, i int) (int, bool) {
	if data[i] != '[' {
		return valueEnd(data, i)
	}
	i, more, ok := openContainer(data, i, '[', ']')
	return r.chatChoicesFrom(data, i, more, ok)
}

// chatChoicesFrom walks the elements of a choices array from the one at data[i] (more),
// or from its end, and returns the array's end.
func (r *streamRewriter) chatChoicesFrom(data []byte, i int, more, ok bool) (int, bool) {
	for ok && more {
		var ve int
		if data[i] == '{' {
			ve, ok = r.chatChoice(data, i)
		} else {
			ve, ok = valueEnd(data, i)
		}
		r.prefix.armed = false // only the first element's first delta is recorded
		if !ok {
			return 0, false
		}
		i, more, ok = nextMember(data, ve, ']')
	}
	return i, ok
}

// chatChoice walks the choice object at data[i] and returns its end.
func (r *streamRewriter) chatChoice(data []byte, i int) (int, bool) {
	i, more, ok := openContainer(data, i, '{', '}')
	return r.chatChoiceFrom(data, i, more, ok)
}

// chatChoiceFrom walks the members of a choice object from the one at data[i] (more), or
// from its end, and returns the object's end.
func (r *streamRewriter) chatChoiceFrom(data []byte, i int, more, ok bool) (int, bool) {
	for ok && more {
		var key []byte
		var vs, ve int
		if key, _, vs, ok = memberHead(data, i); !ok {
			return 0, false
		}
		if string(key) == "delta" && data[vs] == '{' {
			ve, ok = r.chatDelta(data, vs)
		} else {
			ve, ok = valueEnd(data, vs)
		}
		if !ok {
			return 0, false
		}
		i, more, ok = nextMember(data, ve, '}')
	}
	return i, ok
}

// chatDelta walks the delta object at data[i], counting its output text, and returns its
// end.
func (r *streamRewriter) chatDelta(data []byte, i int) (int, bool) {
	r.otherDelta = true
	i, more, ok := openContainer(data, i, '{', '}')
	if p := &r.prefix; p.armed {
		p.armed = false
		if ok && more {
			p.recordDelta(data, i)
		}
	}
	return r.chatDeltaFrom(data, i, more, ok)
}

// chatDeltaFrom walks the members of a delta object from the one at data[i] (more), or
// from its end, and returns the object's end.
func (r *streamRewriter) chatDeltaFrom(data []byte, i int, more, ok bool) (int, bool) {
	for ok && more {
		var key []byte
		var vs, ve int
		if key, _, vs, ok = memberHead(data, i); !ok {
			return 0, false
		}
		if ve, ok = valueEnd(data, vs); !ok {
			return 0, false
		}
		switch string(key) {
		case "content", "refusal":
			r.add(data[vs:ve])
		case "tool_calls":
			r.toolCallArgs(data[vs:ve])
		}
		i, more, ok = nextMember(data, ve, '}')
	}
	return i, ok
}

// chatAfterDelta walks the rest of a choices value after the end of its first choice's
// first delta, at data[d], as chatChoices would from there, and returns the value's end.
func (r *streamRewriter) chatAfterDelta(data []byte, d int) (int, bool) {
	i, more, ok := nextMember(data, d, '}')
	ve, ok := r.chatChoiceFrom(data, i, more, ok)
	if !ok {
		return 0, false
	}
	i, more, ok = nextMember(data, ve, ']')
	return r.chatChoicesFrom(data, i, more, ok)
}
