package response

import "testing"

// FuzzUsageWalk: wherever usageWalk says it walked an object, valueEnd ends the object at
// the same byte and readOpenAIUsage reads the same usage from it.
func FuzzUsageWalk(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`,
		`{ "prompt_tokens" : 1 , "prompt_tokens" : 2 , "prompt_tokens_details" : 7 , "prompt_tokens_details" : {"cached_tokens":4} }`,
		`{"prompt_tokens_details":{"cached_tokens":x,"cached_tokens":2},"completion_tokens":"3","prompt_tokens":1}`,
		`{"prompt_tokens":1"x","y":"}"}`,
		`{"prompt_tokens":1{,"y":2}}`,
		`{"prompt_tokens":1,"a":[{"b":"\""}],"c":tru[e}`,
		`{"prompt_tokens_details":{"cached_tokens":1 2},"prompt_tokens":5}`,
		`{}`,
		`{"a":1,}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for i, c := range b {
			if c != '{' {
				continue
			}
			end, u, uok, walked := usageWalk(b, i)
			if !walked {
				continue
			}
			want, ok := valueEnd(b, i)
			if !ok || end != want {
				t.Fatalf("%q at %d: walked to %d, valueEnd %d %v", b, i, end, want, ok)
			}
			wu, wok := readOpenAIUsage(b[i:end])
			if u != wu || uok != wok {
				t.Fatalf("%q at %d: read %+v %v, want %+v %v", b, i, u, uok, wu, wok)
			}
		}
	})
}

// TestUsageWalkGivesUp: the objects usageWalk cannot vouch for are left to the general
// path (a scalar holding a quote or an opening bracket, a malformed member).
func TestUsageWalkGivesUp(t *testing.T) {
	for _, s := range []string{
		`{"prompt_tokens":1"x","y":"}"}`,
		`{"prompt_tokens":1{,"y":2}}`,
		`{"prompt_tokens_details":{"cached_tokens":1[},"prompt_tokens":5}`,
		`{"prompt_tokens":1,}`,
		`{"prompt_tokens" 1}`,
	} {
		if _, _, _, walked := usageWalk([]byte(s), 0); walked {
			t.Errorf("%s: walked", s)
		}
	}
	end, u, ok, walked := usageWalk([]byte(`{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":2}} `), 0)
	if !walked || end != 63 || !ok || u != (Usage{InputTokens: 3, CacheReadInputTokens: 2}) {
		t.Errorf("got %d %+v %v %v", end, u, ok, walked)
	}
}
