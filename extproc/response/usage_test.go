package response

import (
	"testing"
)

// TestUsageTables reads each format's priced parts from answers in its providers'
// shapes (usage.go's table): totals and parts, streamed and not, at every byte split,
// whole bodies held and rewritten incrementally.
func TestUsageTables(t *testing.T) {
	chat := Usage{InputTokens: 2300, OutputTokens: 140, CacheReadInputTokens: 1024, CacheWriteInputTokens: 512,
		AudioInputTokens: 300, AudioOutputTokens: 40, ServiceTier: "priority"}
	responses := Usage{InputTokens: 5000, OutputTokens: 300, CacheReadInputTokens: 4096, CacheWriteInputTokens: 256,
		ServiceTier: "flex"}
	// Anthropic's input_tokens exclude both cache counts; the 1-hour window's share of
	// the writes is its own.
	anthropic := Usage{InputTokens: 2000 + 80000 + 5000, OutputTokens: 1000, CacheReadInputTokens: 80000,
		CacheWriteInputTokens: 3000, CacheWrite1hInputTokens: 2000, ServiceTier: "priority"}
	for _, tc := range []struct {
		file   string
		format Format
		stream bool
		want   Usage
	}{
		{"usage_chat.json", OpenAIChat, false, chat},
		{"usage_chat_stream.sse", OpenAIChat, true, chat},
		{"usage_responses.json", OpenAIResponses, false, responses},
		{"usage_responses_stream.sse", OpenAIResponses, true, responses},
		{"usage_anthropic.json", AnthropicMessages, false, anthropic},
		{"usage_anthropic_stream.sse", AnthropicMessages, true, anthropic},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in := read(t, tc.file)
			modes := []Options{{Format: tc.format, PublicModel: "demo-cached", Stream: tc.stream, ClientWantsUsage: true}}
			if !tc.stream {
				modes = append(modes, Options{Format: tc.format, PublicModel: "demo-cached", Incremental: true})
			}
			for _, opts := range modes {
				for _, chunks := range chunkings(in) {
					_, rw := feed(t, opts, chunks...)
					if u, ok := rw.Usage(); !ok || u != tc.want {
						t.Fatalf("incremental=%v, %d chunks (first %d bytes): usage %+v, %v; want %+v",
							opts.Incremental, len(chunks), len(chunks[0]), u, ok, tc.want)
					}
				}
			}
		})
	}
}

// TestAnthropicWritesWithoutWindows: an answer without the cache_creation object has
// every write in the default window; a message_delta that repeats the counts does not
// add them twice.
func TestAnthropicWritesWithoutWindows(t *testing.T) {
	var a anthropicUsage
	a.merge([]byte(`{"input_tokens":10,"cache_creation_input_tokens":7,"cache_read_input_tokens":3,"output_tokens":1}`))
	a.merge([]byte(`{"input_tokens":10,"cache_creation_input_tokens":7,"cache_read_input_tokens":3,"output_tokens":9}`))
	want := Usage{InputTokens: 20, OutputTokens: 9, CacheReadInputTokens: 3, CacheWriteInputTokens: 7}
	if u := a.usage(); u != want {
		t.Fatalf("usage %+v, want %+v", u, want)
	}
}
