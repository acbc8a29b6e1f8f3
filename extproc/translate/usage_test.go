package translate

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

// TestUsageAcrossAPIs: a client on another API than the channel's sees the same parts in
// its own API's fields: Anthropic's cache counts outside input_tokens with their
// windows, OpenAI's inside the totals with one write count.
func TestUsageAcrossAPIs(t *testing.T) {
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	anth := messagesUsage(gjson.Parse(`{"input_tokens":2000,"cache_creation_input_tokens":5000,"cache_read_input_tokens":80000,` +
		`"cache_creation":{"ephemeral_5m_input_tokens":3000,"ephemeral_1h_input_tokens":2000},"output_tokens":1000,"service_tier":"standard"}`))
	if want := (Usage{Input: 87000, Output: 1000, CacheRead: 80000, CacheWrite: 3000, CacheWrite1h: 2000}); anth != want {
		t.Fatalf("messagesUsage = %+v, want %+v", anth, want)
	}
	chat := openAIUsage(gjson.Parse(`{"prompt_tokens":2300,"completion_tokens":140,"prompt_tokens_details":{"cached_tokens":1024,"cache_write_tokens":512,"audio_tokens":300},` +
		`"completion_tokens_details":{"reasoning_tokens":64,"audio_tokens":40}}`))
	if want := (Usage{Input: 2300, Output: 140, CacheRead: 1024, CacheWrite: 512, AudioIn: 300, Reasoning: 64, AudioOut: 40}); chat != want {
		t.Fatalf("openAIUsage = %+v, want %+v", chat, want)
	}
	resp := openAIUsage(gjson.Parse(`{"input_tokens":5000,"input_tokens_details":{"cached_tokens":4096,"cache_write_tokens":256},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":200}}`))
	if want := (Usage{Input: 5000, Output: 300, CacheRead: 4096, CacheWrite: 256, Reasoning: 200}); resp != want {
		t.Fatalf("responses openAIUsage = %+v, want %+v", resp, want)
	}
	for _, tc := range []struct{ name, got, want string }{
		{"anthropic to chat", js(chatUsage(anth)),
			`{"prompt_tokens":87000,"completion_tokens":1000,"total_tokens":88000,"prompt_tokens_details":{"cached_tokens":80000,"cache_write_tokens":5000},"completion_tokens_details":{"reasoning_tokens":0}}`},
		{"anthropic to responses", js(responsesUsage(anth)),
			`{"input_tokens":87000,"output_tokens":1000,"total_tokens":88000,"input_tokens_details":{"cached_tokens":80000,"cache_write_tokens":5000},"output_tokens_details":{"reasoning_tokens":0}}`},
		{"anthropic to anthropic", js(messagesUsageOf(anth)),
			`{"input_tokens":2000,"output_tokens":1000,"cache_read_input_tokens":80000,"cache_creation_input_tokens":5000,"cache_creation":{"ephemeral_5m_input_tokens":3000,"ephemeral_1h_input_tokens":2000}}`},
		{"chat to anthropic", js(messagesUsageOf(chat)),
			`{"input_tokens":764,"output_tokens":140,"cache_read_input_tokens":1024,"cache_creation_input_tokens":512,"cache_creation":{"ephemeral_5m_input_tokens":512,"ephemeral_1h_input_tokens":0}}`},
		{"chat to responses", js(responsesUsage(chat)),
			`{"input_tokens":2300,"output_tokens":140,"total_tokens":2440,"input_tokens_details":{"cached_tokens":1024,"cache_write_tokens":512,"audio_tokens":300},"output_tokens_details":{"reasoning_tokens":64,"audio_tokens":40}}`},
		{"responses to anthropic, no writes", js(messagesUsageOf(Usage{Input: 10, Output: 2, CacheRead: 4})),
			`{"input_tokens":6,"output_tokens":2,"cache_read_input_tokens":4,"cache_creation_input_tokens":0}`},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
}
