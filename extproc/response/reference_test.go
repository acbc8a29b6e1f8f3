package response

import "bytes"

// The chat event walk and the JSON primitives as they were before the single-loop walk
// (stream_chat.go) and the word-at-a-time string scan: kept here, unchanged, as the
// oracle the differential tests compare the fast code with.

// chatReference is the former streamRewriter.chat.
func (r *streamRewriter) chatReference(data []byte) bool {
	i := skipSpace(data, 0)
	var usageKey, usageStart, usageEnd, usagePrev int
	hasUsage, choicesEmpty := false, true
	prevEnd := -1
	end, ok := refParseObject(data, i, func(key []byte, keyStart, vs int) (int, bool) {
		var ve int
		var ok bool
		switch string(key) {
		case "model":
			if ve, ok = refValueEnd(data, vs); ok {
				r.replace(data, vs, ve)
			}
		case "choices":
			ve, ok = r.refChatChoices(data, vs)
			choicesEmpty = ok && isEmptyArray(data[vs:ve])
		case "usage":
			ve, ok = refValueEnd(data, vs)
			usageKey, usageStart, usageEnd, usagePrev, hasUsage = keyStart, vs, ve, prevEnd, true
		case "error":
			if ve, ok = refValueEnd(data, vs); ok {
				r.replaceMessage(data, vs, ve)
			}
		default:
			ve, ok = refValueEnd(data, vs)
		}
		prevEnd = ve
		return ve, ok
	})
	if !ok || skipSpace(data, end) != len(data) {
		return false
	}
	if hasUsage {
		v := data[usageStart:usageEnd]
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
			s, e := removalAt(data, usageKey, usageEnd, usagePrev)
			r.edits = addEdit(r.edits, edit{s, e, removeBytes})
		}
	}
	return true
}

func (r *streamRewriter) refChatChoices(data []byte, i int) (int, bool) {
	if i >= len(data) || data[i] != '[' {
		return refValueEnd(data, i)
	}
	return refParseArray(data, i, func(vs int) (int, bool) {
		if data[vs] != '{' {
			return refValueEnd(data, vs)
		}
		return refParseObject(data, vs, func(key []byte, _, vs int) (int, bool) {
			if string(key) != "delta" || data[vs] != '{' {
				return refValueEnd(data, vs)
			}
			return refParseObject(data, vs, func(key []byte, _, vs int) (int, bool) {
				ve, ok := refValueEnd(data, vs)
				if !ok {
					return ve, ok
				}
				switch string(key) {
				case "content", "refusal":
					r.add(data[vs:ve])
				case "tool_calls":
					r.toolCallArgs(data[vs:ve])
				}
				return ve, true
			})
		})
	})
}

var refStringStop, refStructural [256]bool

func init() {
	refStringStop['"'], refStringStop['\\'] = true, true
	for _, c := range []byte(`"{}[]`) {
		refStructural[c] = true
	}
}

func refStringEnd(b []byte, i int) (int, bool) {
	j := i + 1
	lim := min(j+16, len(b))
	for j < lim {
		if !refStringStop[b[j]] {
			j++
			continue
		}
		if b[j] == '"' {
			return j + 1, true
		}
		j += 2
		lim = min(lim+2, len(b))
	}
	q := -1
	for j < len(b) {
		if q < j {
			k := bytes.IndexByte(b[j:], '"')
			if k < 0 {
				return 0, false
			}
			q = j + k
		}
		bs := bytes.IndexByte(b[j:q], '\\')
		if bs < 0 {
			return q + 1, true
		}
		j += bs + 2
	}
	return 0, false
}

func refValueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return refStringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); {
			if !refStructural[b[j]] {
				j++
				continue
			}
			switch b[j] {
			case '"':
				e, ok := refStringEnd(b, j)
				if !ok {
					return 0, false
				}
				j = e
				continue
			case '{', '[':
				depth++
			default:
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
			j++
		}
		return 0, false
	case ',', ':', '}', ']':
		return 0, false
	default:
		j := i
		for j < len(b) {
			c := b[j]
			if c == ',' || c == '}' || c == ']' || isSpace(c) {
				break
			}
			j++
		}
		return j, j > i
	}
}

func refParseObject(b []byte, i int, fn func(key []byte, keyStart, valStart int) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		ke, ok := refStringEnd(b, i)
		if !ok {
			return 0, false
		}
		j := skipSpace(b, ke)
		if j >= len(b) || b[j] != ':' {
			return 0, false
		}
		vs := skipSpace(b, j+1)
		if vs >= len(b) {
			return 0, false
		}
		ve, ok := fn(b[i+1:ke-1], i, vs)
		if !ok {
			return 0, false
		}
		j = skipSpace(b, ve)
		if j >= len(b) {
			return 0, false
		}
		switch b[j] {
		case ',':
			i = skipSpace(b, j+1)
		case '}':
			return j + 1, true
		default:
			return 0, false
		}
	}
}

func refParseArray(b []byte, i int, fn func(valStart int) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] != '[' {
		return 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		if i >= len(b) {
			return 0, false
		}
		ve, ok := fn(i)
		if !ok {
			return 0, false
		}
		j := skipSpace(b, ve)
		if j >= len(b) {
			return 0, false
		}
		switch b[j] {
		case ',':
			i = skipSpace(b, j+1)
		case ']':
			return j + 1, true
		default:
			return 0, false
		}
	}
}

// refReadOpenAIUsage, refReadResponsesUsage and refMerge are the usage readers as they
// were before getAll: one walk per member read.
func refReadOpenAIUsage(v []byte) (Usage, bool) {
	in, ok := getInt(v, "prompt_tokens")
	if !ok {
		return Usage{}, false
	}
	u := Usage{InputTokens: in}
	if out, ok := getInt(v, "completion_tokens"); ok {
		u.OutputTokens = out
	}
	refDetails(&u, v, "prompt_tokens_details", "completion_tokens_details")
	return u, true
}

func refReadResponsesUsage(v []byte) (Usage, bool) {
	in, ok1 := getInt(v, "input_tokens")
	out, ok2 := getInt(v, "output_tokens")
	if !ok1 || !ok2 {
		return Usage{}, false
	}
	u := Usage{InputTokens: in, OutputTokens: out}
	refDetails(&u, v, "input_tokens_details", "output_tokens_details")
	return u, true
}

func refDetails(u *Usage, v []byte, in, out string) {
	if d, ok := get(v, in); ok {
		u.CacheReadInputTokens, _ = getInt(d, "cached_tokens")
		u.CacheWriteInputTokens, _ = getInt(d, "cache_write_tokens")
		u.AudioInputTokens, _ = getInt(d, "audio_tokens")
		u.ImageInputTokens, _ = getInt(d, "image_tokens")
	}
	if d, ok := get(v, out); ok {
		u.AudioOutputTokens, _ = getInt(d, "audio_tokens")
	}
}

func (a *anthropicUsage) refMerge(v []byte) {
	for key, f := range map[string]*int64{"input_tokens": &a.input, "output_tokens": &a.output,
		"cache_read_input_tokens": &a.cacheRead, "cache_creation_input_tokens": &a.cacheCreation} {
		if n, ok := getInt(v, key); ok {
			*f = n
		}
	}
	if cc, ok := get(v, "cache_creation"); ok && !isNull(cc) {
		if n, ok := getInt(cc, "ephemeral_5m_input_tokens"); ok {
			a.write5m = n
		}
		if n, ok := getInt(cc, "ephemeral_1h_input_tokens"); ok {
			a.write1h = n
		}
	}
	if t, ok := get(v, "service_tier"); ok {
		noteTier(&a.tier, t)
	}
}
