package response

// Usage readers, one per format. Which of a format's totals include which parts is the
// pricing's business: a part counted twice is billed twice, a part outside the total
// is billed on top of it. usageTables below is that table, and the readers follow it;
// TestUsageTables checks them against recorded answers of each format.
//
//	format            input total                      parts inside it       parts outside it
//	OpenAI chat       prompt_tokens                    prompt_tokens_details.cached_tokens, .cache_write_tokens, .audio_tokens, .image_tokens
//	                  completion_tokens (output)       completion_tokens_details.audio_tokens (reasoning_tokens: plain output)
//	OpenAI Responses  input_tokens                     input_tokens_details.cached_tokens, .cache_write_tokens, .audio_tokens, .image_tokens
//	                  output_tokens                    output_tokens_details.audio_tokens (reasoning_tokens: plain output)
//	Anthropic         input_tokens                                           cache_read_input_tokens, cache_creation_input_tokens
//	                  cache_creation_input_tokens      cache_creation.ephemeral_5m_input_tokens, .ephemeral_1h_input_tokens
//	                  output_tokens
//
// The tier: OpenAI chat and Responses report it at the top of the answer
// ("service_tier"; in every chunk of a chat stream, in the response object of a
// Responses stream), Anthropic inside usage ("service_tier": "standard", "priority",
// "batch").

var openAIUsageKeys = []string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"}

// readOpenAIUsage reads chat/embeddings usage; ok is false without prompt_tokens.
func readOpenAIUsage(v []byte) (Usage, bool) {
	var m [4][]byte
	getAll(v, openAIUsageKeys, m[:])
	in, ok := jsonInt(m[0])
	if !ok {
		return Usage{}, false
	}
	u := Usage{InputTokens: in}
	u.OutputTokens, _ = jsonInt(m[1])
	u.inputDetails(m[2])
	u.outputDetails(m[3])
	return u, true
}

var responsesUsageKeys = []string{"input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details"}

// readResponsesUsage reads Responses usage; ok is false without both totals.
func readResponsesUsage(v []byte) (Usage, bool) {
	var m [4][]byte
	getAll(v, responsesUsageKeys, m[:])
	in, ok1 := jsonInt(m[0])
	out, ok2 := jsonInt(m[1])
	if !ok1 || !ok2 {
		return Usage{}, false
	}
	u := Usage{InputTokens: in, OutputTokens: out}
	u.inputDetails(m[2])
	u.outputDetails(m[3])
	return u, true
}

var inputDetailKeys = []string{"cached_tokens", "cache_write_tokens", "audio_tokens", "image_tokens"}

// inputDetails reads the parts an OpenAI input total includes (d may be nil or null).
func (u *Usage) inputDetails(d []byte) {
	if d == nil {
		return
	}
	var m [4][]byte
	getAll(d, inputDetailKeys, m[:])
	for k, f := range [...]*int64{&u.CacheReadInputTokens, &u.CacheWriteInputTokens, &u.AudioInputTokens, &u.ImageInputTokens} {
		*f, _ = jsonInt(m[k])
	}
}

// outputDetails reads the audio part an OpenAI output total includes.
func (u *Usage) outputDetails(d []byte) {
	if d != nil {
		u.AudioOutputTokens, _ = getInt(d, "audio_tokens")
	}
}

// readBodyUsage reads the top-level "usage" value v of a non-streamed JSON body in the
// format's shape; ok is false for a format without token usage.
func readBodyUsage(f Format, v []byte) (Usage, bool) {
	switch f {
	case OpenAIChat, OpenAIEmbeddings:
		return readOpenAIUsage(v)
	case OpenAIResponses:
		return readResponsesUsage(v)
	case AnthropicMessages:
		_, in := getInt(v, "input_tokens")
		_, out := getInt(v, "output_tokens")
		if !in || !out {
			return Usage{}, false
		}
		var a anthropicUsage
		a.merge(v)
		return a.usage(), true
	}
	return Usage{}, false
}

// anthropicUsage holds the Anthropic usage fields seen so far (a stream's message_start
// and message_delta each carry some); Anthropic reports cache tokens apart from
// input_tokens.
type anthropicUsage struct {
	input, output, cacheRead, cacheCreation, write5m, write1h int64
	tier                                                      string
}

var anthropicUsageKeys = []string{"input_tokens", "output_tokens", "cache_read_input_tokens",
	"cache_creation_input_tokens", "cache_creation", "service_tier"}

var cacheCreationKeys = []string{"ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"}

// merge overrides the fields present in v (an Anthropic usage object).
func (a *anthropicUsage) merge(v []byte) {
	var m [6][]byte
	getAll(v, anthropicUsageKeys, m[:])
	for k, f := range [...]*int64{&a.input, &a.output, &a.cacheRead, &a.cacheCreation} {
		if n, ok := jsonInt(m[k]); ok {
			*f = n
		}
	}
	if cc := m[4]; cc != nil && !isNull(cc) {
		var w [2][]byte
		getAll(cc, cacheCreationKeys, w[:])
		for k, f := range [...]*int64{&a.write5m, &a.write1h} {
			if n, ok := jsonInt(w[k]); ok {
				*f = n
			}
		}
	}
	noteTier(&a.tier, m[5])
}

// usage is the merged usage with its totals: the cache writes are the larger of
// cache_creation_input_tokens and its two windows' sum, the one-hour window's share
// its own, the rest the default window's.
func (a anthropicUsage) usage() Usage {
	writes := max(a.cacheCreation, a.write5m+a.write1h)
	return Usage{
		InputTokens:             a.input + a.cacheRead + writes,
		OutputTokens:            a.output,
		CacheReadInputTokens:    a.cacheRead,
		CacheWriteInputTokens:   writes - a.write1h,
		CacheWrite1hInputTokens: a.write1h,
		ServiceTier:             a.tier,
	}
}

// noteTier sets *tier to the JSON string raw (the tier an answer reports); anything else
// leaves it. Streams report the tier in many events: the string is made only when it
// changes.
func noteTier(tier *string, raw []byte) {
	if len(raw) < 2 || raw[0] != '"' || string(raw[1:len(raw)-1]) == *tier {
		return
	}
	if s, ok := plainUnquote(raw); ok {
		*tier = s
	}
}
