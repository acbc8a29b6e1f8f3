package response

// A chat chunk's usage object used to be crossed three times: once by the walk to find
// its end, once by readOpenAIUsage to find prompt_tokens, completion_tokens and
// prompt_tokens_details, and once more to find cached_tokens in the details. usageWalk
// does all three in the one pass that finds the end, when that pass can be shown to
// agree with the other two; otherwise the caller takes the general path.
//
// Why the results agree: valueEnd ends an object where its bracket count returns to
// zero, crossing strings and nothing else. A member-by-member walk that succeeds crosses
// every key and string value the same way, ends nested containers with that same count,
// and steps over scalars and separators, which hold no bracket or quote unless a scalar
// does (a scalar's grammar is not checked, so it may hold '"', '{' or '['; the walk gives
// up on one). So where the walk reaches the closing brace, the count does too, and
// readOpenAIUsage, which walks the same bytes the same way, finds the same members.

// usageWalk walks the usage object at data[i] (its first byte is '{'): it returns the
// end of the object and what readOpenAIUsage returns for it. walked is false when the
// object is not well formed or a scalar in it holds a quote or an opening bracket: then
// nothing is known and the caller finds the end with valueEnd.
func usageWalk(data []byte, i int) (end int, u Usage, uok, walked bool) {
	var prompt, completion []byte
	var cached int64
	detailsSeen := false
	i, more, ok := openContainer(data, i, '{', '}')
	for ok && more {
		var key []byte
		var vs, ve int
		if key, _, vs, ok = memberHead(data, i); !ok {
			return 0, Usage{}, false, false
		}
		if string(key) == "prompt_tokens_details" && !detailsSeen {
			detailsSeen = true
			if data[vs] == '{' {
				ve, cached, ok = cachedTokensWalk(data, vs)
			} else {
				ve, ok = plainValueEnd(data, vs)
			}
		} else {
			ve, ok = plainValueEnd(data, vs)
			switch {
			case !ok:
			case prompt == nil && string(key) == "prompt_tokens":
				prompt = data[vs:ve]
			case completion == nil && string(key) == "completion_tokens":
				completion = data[vs:ve]
			}
		}
		if !ok {
			return 0, Usage{}, false, false
		}
		i, more, ok = nextMember(data, ve, '}')
	}
	if !ok {
		return 0, Usage{}, false, false
	}
	in, ok := jsonInt(prompt)
	if !ok {
		return i, Usage{}, false, true
	}
	u = Usage{InputTokens: in, CacheReadInputTokens: cached}
	if out, ok := jsonInt(completion); ok {
		u.OutputTokens = out
	}
	return i, u, true, true
}

// cachedTokensWalk walks the details object at data[i] (its first byte is '{') under the
// rules of usageWalk: it returns its end and the integer value of its first
// "cached_tokens" member (0 when there is none or it is not one).
func cachedTokensWalk(data []byte, i int) (end int, cached int64, ok bool) {
	found := false
	i, more, ok := openContainer(data, i, '{', '}')
	for ok && more {
		var key []byte
		var vs, ve int
		if key, _, vs, ok = memberHead(data, i); !ok {
			return 0, 0, false
		}
		if ve, ok = plainValueEnd(data, vs); !ok {
			return 0, 0, false
		}
		if !found && string(key) == "cached_tokens" {
			found = true
			cached, _ = jsonInt(data[vs:ve])
		}
		i, more, ok = nextMember(data, ve, '}')
	}
	return i, cached, ok
}

// plainValueEnd is valueEnd, except that it fails on a scalar that holds a quote or an
// opening bracket (see usageWalk).
func plainValueEnd(data []byte, i int) (int, bool) {
	e, ok := valueEnd(data, i)
	if !ok {
		return 0, false
	}
	if c := data[i]; c != '"' && c != '{' && c != '[' {
		for _, c := range data[i:e] {
			if c == '"' || c == '{' || c == '[' {
				return 0, false
			}
		}
	}
	return e, true
}
