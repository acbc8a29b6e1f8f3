package translate

import "github.com/tidwall/gjson"

// Usage and finish reasons in each API's words: the one home of those mappings, for
// the response and stream halves alike.

// openAIUsage reads chat usage (prompt/completion) or Responses usage (input/output).
func openAIUsage(u gjson.Result) Usage {
	in, out := u.Get("prompt_tokens"), u.Get("completion_tokens")
	cached, reasoning := u.Get("prompt_tokens_details.cached_tokens"), u.Get("completion_tokens_details.reasoning_tokens")
	if !in.Exists() {
		in, out = u.Get("input_tokens"), u.Get("output_tokens")
		cached, reasoning = u.Get("input_tokens_details.cached_tokens"), u.Get("output_tokens_details.reasoning_tokens")
	}
	return Usage{Input: in.Int(), Output: out.Int(), CacheRead: cached.Int(), Reasoning: reasoning.Int()}
}

// messagesUsage reads Anthropic usage: input_tokens excludes the cache reads and writes.
func messagesUsage(u gjson.Result) Usage {
	read, write := u.Get("cache_read_input_tokens").Int(), u.Get("cache_creation_input_tokens").Int()
	return Usage{Input: u.Get("input_tokens").Int() + read + write, Output: u.Get("output_tokens").Int(),
		CacheRead: read, CacheWrite: write}
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
	set(&u.Reasoning, v.Reasoning)
}

type chatUsageOut struct {
	PromptTokens            int64            `json:"prompt_tokens"`
	CompletionTokens        int64            `json:"completion_tokens"`
	TotalTokens             int64            `json:"total_tokens"`
	PromptTokensDetails     *cachedTokens    `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *reasoningTokens `json:"completion_tokens_details,omitempty"`
}

type cachedTokens struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type reasoningTokens struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

func chatUsage(u Usage) chatUsageOut {
	return chatUsageOut{PromptTokens: u.Input, CompletionTokens: u.Output, TotalTokens: u.Input + u.Output,
		PromptTokensDetails: &cachedTokens{u.CacheRead}, CompletionTokensDetails: &reasoningTokens{u.Reasoning}}
}

type messagesUsageOut struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

func messagesUsageOf(u Usage) messagesUsageOut {
	return messagesUsageOut{InputTokens: max(u.Input-u.CacheRead-u.CacheWrite, 0), OutputTokens: u.Output,
		CacheReadInputTokens: u.CacheRead, CacheCreationInputTokens: u.CacheWrite}
}

type responsesUsageOut struct {
	InputTokens         int64           `json:"input_tokens"`
	OutputTokens        int64           `json:"output_tokens"`
	TotalTokens         int64           `json:"total_tokens"`
	InputTokensDetails  cachedTokens    `json:"input_tokens_details"`
	OutputTokensDetails reasoningTokens `json:"output_tokens_details"`
}

func responsesUsage(u Usage) responsesUsageOut {
	return responsesUsageOut{InputTokens: u.Input, OutputTokens: u.Output, TotalTokens: u.Input + u.Output,
		InputTokensDetails: cachedTokens{u.CacheRead}, OutputTokensDetails: reasoningTokens{u.Reasoning}}
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
