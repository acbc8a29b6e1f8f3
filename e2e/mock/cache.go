package mock

// The priced parts an answer reports beyond its input and output totals, steered by the
// directives LOCAL-STACK.md ("Rate cards") lists, in each format's own fields: cache
// reads and writes, one-hour writes, audio, and the service tier.

// bill is what an answer reports besides its totals. Each input count is clamped to the
// prompt's tokens.
type bill struct {
	read, write, write1h, audioIn, audioOut int
	tier                                    string
}

// billFor is the bill of answer a to a request of api ("chat", "responses", "messages").
// Anthropic writes to the cache only where the request marks it (a cache_control block;
// for one hour, one with ttl "1h") and answers the standard tier; OpenAI answers the
// requested tier, auto as default.
func billFor(a answer, body map[string]any, api string) bill {
	d := a.dir
	clamp := func(n int) int { return min(n, a.input) }
	b := bill{read: clamp(d.cacheRead)}
	if api == "messages" {
		marked, hour := cacheControls(body)
		if marked {
			b.write = clamp(d.cacheWrite)
		}
		if hour {
			b.write1h = clamp(d.cacheWrite1h)
		}
		b.tier = "standard"
	} else {
		b.write = clamp(d.cacheWrite)
		if api == "chat" {
			b.audioIn, b.audioOut = clamp(d.audioIn), d.audioOut
		}
		b.tier, _ = body["service_tier"].(string)
		if b.tier == "" || b.tier == "auto" {
			b.tier = "default"
		}
	}
	if d.tier != "" {
		b.tier = d.tier
	}
	return b
}

// cacheControls reports whether v holds a cache_control object, and one with ttl "1h".
func cacheControls(v any) (marked, hour bool) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			m, h := cacheControls(e)
			marked, hour = marked || m, hour || h
		}
	case map[string]any:
		for k, e := range x {
			if cc, ok := e.(map[string]any); ok && k == "cache_control" {
				marked = true
				hour = hour || cc["ttl"] == "1h"
				continue
			}
			m, h := cacheControls(e)
			marked, hour = marked || m, hour || h
		}
	}
	return marked, hour
}

type promptDetails struct {
	CachedTokens     int `json:"cached_tokens"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	AudioTokens      int `json:"audio_tokens"`
}

type completionDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
	AudioTokens     int `json:"audio_tokens"`
}

// chatUsageOf is a chat answer's usage: every part inside prompt_tokens and
// completion_tokens (audio output is on top of the text's tokens).
func chatUsageOf(in, out int, b bill) chatUsage {
	out += b.audioOut
	return chatUsage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out,
		PromptTokensDetails:     promptDetails{CachedTokens: b.read, CacheWriteTokens: b.write, AudioTokens: b.audioIn},
		CompletionTokensDetails: completionDetails{AudioTokens: b.audioOut}}
}

type respInputDetails struct {
	CachedTokens     int `json:"cached_tokens"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

type cacheCreation struct {
	Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
}

// anthropicUsageOf is a Messages answer's usage: the cache counts outside input_tokens.
func anthropicUsageOf(in, out int, b bill) anthropicUsage {
	return anthropicUsage{InputTokens: max(in-b.read-b.write-b.write1h, 0), OutputTokens: out,
		CacheReadInputTokens: b.read, CacheCreationInputTokens: b.write + b.write1h,
		CacheCreation: cacheCreation{b.write, b.write1h}, ServiceTier: b.tier}
}

// hasKey reports whether v holds an object with key k at any depth.
func hasKey(v any, k string) bool {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if hasKey(e, k) {
				return true
			}
		}
	case map[string]any:
		for key, e := range x {
			if key == k || hasKey(e, k) {
				return true
			}
		}
	}
	return false
}
