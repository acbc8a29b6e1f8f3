package translate

import "github.com/tidwall/gjson"

// Usage and finish reasons in each API's words: the one home of those mappings, for
// the response and stream halves alike.

// openAIUsage reads chat usage (prompt/completion) or Responses usage (input/output):
// the parts are inside the totals.
func openAIUsage(u gjson.Result) Usage {
	in, out := u.Get("prompt_tokens"), u.Get("completion_tokens")
	inD, outD := u.Get("prompt_tokens_details"), u.Get("completion_tokens_details")
	if !in.Exists() {
		in, out = u.Get("input_tokens"), u.Get("output_tokens")
		inD, outD = u.Get("input_tokens_details"), u.Get("output_tokens_details")
	}
	return Usage{Input: in.Int(), Output: out.Int(),
		CacheRead: inD.Get("cached_tokens").Int(), CacheWrite: inD.Get("cache_write_tokens").Int(), AudioIn: inD.Get("audio_tokens").Int(),
		Reasoning: outD.Get("reasoning_tokens").Int(), AudioOut: outD.Get("audio_tokens").Int()}
}

// messagesUsage reads Anthropic usage: input_tokens excludes the cache reads and writes;
// cache_creation splits the writes into their windows.
func messagesUsage(u gjson.Result) Usage {
	read, created := u.Get("cache_read_input_tokens").Int(), u.Get("cache_creation_input_tokens").Int()
	w5m, w1h := u.Get("cache_creation.ephemeral_5m_input_tokens").Int(), u.Get("cache_creation.ephemeral_1h_input_tokens").Int()
	writes := max(created, w5m+w1h)
	return Usage{Input: u.Get("input_tokens").Int() + read + writes, Output: u.Get("output_tokens").Int(),
		CacheRead: read, CacheWrite: writes - w1h, CacheWrite1h: w1h}
}

// merge sets the non-zero fields of v over u.
func (u *Usage) merge(v Usage) {
	set := func(dst *int64, x int64) {
		if x != 0 {
			*dst = x
		}
	}
	set(&u.Input, v.Input)
	set(&u.Output, v.Output)
	set(&u.CacheRead, v.CacheRead)
	set(&u.CacheWrite, v.CacheWrite)
	set(&u.CacheWrite1h, v.CacheWrite1h)
	set(&u.AudioIn, v.AudioIn)
	set(&u.Reasoning, v.Reasoning)
	set(&u.AudioOut, v.AudioOut)
}

type chatUsageOut struct {
	PromptTokens            int64            `json:"prompt_tokens"`
	CompletionTokens        int64            `json:"completion_tokens"`
	TotalTokens             int64            `json:"total_tokens"`
	PromptTokensDetails     *inputDetails    `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *reasoningTokens `json:"completion_tokens_details,omitempty"`
}

// inputDetails are the parts of an OpenAI input total: OpenAI has one cache-write count,
// both of Anthropic's windows.
type inputDetails struct {
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	AudioTokens      int64 `json:"audio_tokens,omitempty"`
}

type reasoningTokens struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
	AudioTokens     int64 `json:"audio_tokens,omitempty"`
}

func (u Usage) inputDetails() inputDetails {
	return inputDetails{CachedTokens: u.CacheRead, CacheWriteTokens: u.CacheWrite + u.CacheWrite1h, AudioTokens: u.AudioIn}
}

func chatUsage(u Usage) chatUsageOut {
	d := u.inputDetails()
	return chatUsageOut{PromptTokens: u.Input, CompletionTokens: u.Output, TotalTokens: u.Input + u.Output,
		PromptTokensDetails: &d, CompletionTokensDetails: &reasoningTokens{u.Reasoning, u.AudioOut}}
}

type messagesUsageOut struct {
	InputTokens              int64             `json:"input_tokens"`
	OutputTokens             int64             `json:"output_tokens"`
	CacheReadInputTokens     int64             `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64             `json:"cache_creation_input_tokens"`
	CacheCreation            *cacheCreationOut `json:"cache_creation,omitempty"`
}

type cacheCreationOut struct {
	Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
}

// messagesUsageOf writes Anthropic usage: the cache counts outside input_tokens, the
// writes' windows when there were writes.
func messagesUsageOf(u Usage) messagesUsageOut {
	writes := u.CacheWrite + u.CacheWrite1h
	out := messagesUsageOut{InputTokens: max(u.Input-u.CacheRead-writes, 0), OutputTokens: u.Output,
		CacheReadInputTokens: u.CacheRead, CacheCreationInputTokens: writes}
	if writes > 0 {
		out.CacheCreation = &cacheCreationOut{u.CacheWrite, u.CacheWrite1h}
	}
	return out
}

type responsesUsageOut struct {
	InputTokens         int64           `json:"input_tokens"`
	OutputTokens        int64           `json:"output_tokens"`
	TotalTokens         int64           `json:"total_tokens"`
	InputTokensDetails  inputDetails    `json:"input_tokens_details"`
	OutputTokensDetails reasoningTokens `json:"output_tokens_details"`
}

func responsesUsage(u Usage) responsesUsageOut {
	return responsesUsageOut{InputTokens: u.Input, OutputTokens: u.Output, TotalTokens: u.Input + u.Output,
		InputTokensDetails: u.inputDetails(), OutputTokensDetails: reasoningTokens{u.Reasoning, u.AudioOut}}
}

// chatFinish reads a chat finish_reason.
func chatFinish(s string) Finish {
	switch s {
	case "stop":
		return FinishStop
	case "length":
		return FinishLength
	case "tool_calls", "function_call":
		return FinishToolCalls
	case "content_filter":
		return FinishContentFilter
	}
	return FinishUnknown
}

// chatFinishOut writes a chat finish_reason.
func chatFinishOut(f Finish) string {
	switch f {
	case FinishLength:
		return "length"
	case FinishToolCalls:
		return "tool_calls"
	case FinishContentFilter:
		return "content_filter"
	}
	return "stop"
}

// messagesFinish reads an Anthropic stop_reason.
func messagesFinish(s string) Finish {
	switch s {
	case "end_turn", "pause_turn":
		return FinishStop
	case "max_tokens":
		return FinishLength
	case "tool_use":
		return FinishToolCalls
	case "stop_sequence":
		return FinishStopSequence
	case "refusal":
		return FinishContentFilter
	}
	return FinishUnknown
}

// messagesFinishOut writes an Anthropic stop_reason and stop_sequence (nil unless a
// known stop sequence matched).
func messagesFinishOut(f Finish, seq string) (string, *string) {
	switch f {
	case FinishLength:
		return "max_tokens", nil
	case FinishToolCalls:
		return "tool_use", nil
	case FinishStopSequence:
		if seq != "" {
			return "stop_sequence", &seq
		}
	case FinishContentFilter:
		return "refusal", nil
	}
	return "end_turn", nil
}

// geminiUsage reads usageMetadata: promptTokenCount includes the cached tokens;
// thoughtsTokenCount is output billed apart from candidatesTokenCount; the prompt of
// built-in tools (toolUsePromptTokenCount) is input.
func geminiUsage(u gjson.Result) Usage {
	thoughts := u.Get("thoughtsTokenCount").Int()
	return Usage{
		Input:     u.Get("promptTokenCount").Int() + u.Get("toolUsePromptTokenCount").Int(),
		Output:    u.Get("candidatesTokenCount").Int() + thoughts,
		CacheRead: u.Get("cachedContentTokenCount").Int(),
		Reasoning: thoughts,
	}
}

// geminiFinish reads a finishReason. Gemini says STOP for a matched stop sequence too,
// and for an answer that called functions.
func geminiFinish(s string, called bool) Finish {
	switch s {
	case "":
		return FinishUnknown
	case "MAX_TOKENS":
		return FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE":
		return FinishContentFilter
	}
	if called {
		return FinishToolCalls
	}
	return FinishStop
}

// bedrockUsage reads Converse usage: inputTokens excludes the cache reads and writes,
// as Anthropic's input_tokens does.
func bedrockUsage(u gjson.Result) Usage {
	read, write := u.Get("cacheReadInputTokens").Int(), u.Get("cacheWriteInputTokens").Int()
	return Usage{Input: u.Get("inputTokens").Int() + read + write, Output: u.Get("outputTokens").Int(),
		CacheRead: read, CacheWrite: write}
}

// bedrockFinish reads a Converse stopReason.
func bedrockFinish(s string) Finish {
	switch s {
	case "end_turn":
		return FinishStop
	case "max_tokens", "model_context_window_exceeded":
		return FinishLength
	case "tool_use":
		return FinishToolCalls
	case "stop_sequence":
		return FinishStopSequence
	case "guardrail_intervened", "content_filtered":
		return FinishContentFilter
	}
	return FinishUnknown
}
