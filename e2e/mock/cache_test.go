package mock_test

import (
	"bytes"
	"testing"

	"github.com/tidwall/gjson"
)

// answerJSON returns the JSON of an answer: the body, or each stream event's data.
func answerJSON(b []byte, stream bool) []string {
	if !stream {
		return []string{string(b)}
	}
	var out []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && string(d) != "[DONE]" {
			out = append(out, string(d))
		}
	}
	return out
}

// TestMockBillsRateCardParts: the directives of LOCAL-STACK.md's "Rate cards" appear in
// each format's own fields, streamed and not, with the tier.
func TestMockBillsRateCardParts(t *testing.T) {
	srv := newServer(t)
	anth := map[string]string{"X-Api-Key": "sk-mock-anthropic", "Anthropic-Version": "2023-06-01"}
	const words = "one two three four five six seven eight nine ten"
	for _, stream := range []bool{false, true} {
		s := "false"
		if stream {
			s = "true"
		}
		t.Run("chat stream="+s, func(t *testing.T) {
			body := `{"model":"mock-gpt","stream":` + s + `,"stream_options":` + map[bool]string{true: `{"include_usage":true}`, false: `null`}[stream] +
				`,"service_tier":"priority","messages":[{"role":"user","content":"` + words + ` [[mock:cache_read=4]] [[mock:cache_write=3]] [[mock:audio_in=2]] [[mock:audio_out=5]] [[mock:tokens=2]]"}]}`
			status, _, b := post(t, srv.URL+"/v1/chat/completions", openAIKey, body)
			evs := answerJSON(b, stream)
			u := gjson.Get(evs[len(evs)-1], "usage")
			if status != 200 || u.Get("prompt_tokens_details.cached_tokens").Int() != 4 || u.Get("prompt_tokens_details.cache_write_tokens").Int() != 3 ||
				u.Get("prompt_tokens_details.audio_tokens").Int() != 2 || u.Get("completion_tokens_details.audio_tokens").Int() != 5 ||
				u.Get("completion_tokens").Int() != 2+5 || gjson.Get(evs[0], "service_tier").Str != "priority" {
				t.Fatalf("%d %s", status, b)
			}
		})
		t.Run("responses stream="+s, func(t *testing.T) {
			body := `{"model":"mock-gpt","stream":` + s + `,"input":"` + words + ` [[mock:cache_read=4]] [[mock:cache_write=3]] [[mock:tier=flex]]"}`
			status, _, b := post(t, srv.URL+"/v1/responses", openAIKey, body)
			evs := answerJSON(b, stream)
			r := gjson.Parse(evs[len(evs)-1])
			if stream {
				r = r.Get("response")
			}
			if status != 200 || r.Get("usage.input_tokens_details.cached_tokens").Int() != 4 ||
				r.Get("usage.input_tokens_details.cache_write_tokens").Int() != 3 || r.Get("service_tier").Str != "flex" {
				t.Fatalf("%d %s", status, b)
			}
		})
		t.Run("messages stream="+s, func(t *testing.T) {
			var prompt int64
			for _, tc := range []struct {
				cc                 string
				write, write1h, in int64
			}{
				{``, 0, 0, 0},
				{`,"cache_control":{"type":"ephemeral"}`, 3, 0, 0},
				{`,"cache_control":{"type":"ephemeral","ttl":"1h"}`, 3, 2, 0},
			} {
				body := `{"model":"mock-claude","max_tokens":50,"stream":` + s + `,"messages":[{"role":"user","content":[{"type":"text","text":"` + words +
					` [[mock:cache_read=4]] [[mock:cache_write=3]] [[mock:cache_write_1h=2]]"` + tc.cc + `}]}]}`
				status, _, b := post(t, srv.URL+"/v1/messages", anth, body)
				u := gjson.Get(answerJSON(b, stream)[0], "usage")
				if stream {
					u = gjson.Get(answerJSON(b, stream)[0], "message.usage")
				}
				// The cache counts are outside input_tokens: the total is the prompt's,
				// whatever the markers.
				total := u.Get("input_tokens").Int() + u.Get("cache_read_input_tokens").Int() + u.Get("cache_creation_input_tokens").Int()
				if prompt == 0 {
					prompt = total
				}
				if total != prompt || status != 200 || u.Get("cache_creation_input_tokens").Int() != tc.write+tc.write1h ||
					u.Get("cache_creation.ephemeral_5m_input_tokens").Int() != tc.write || u.Get("cache_creation.ephemeral_1h_input_tokens").Int() != tc.write1h ||
					u.Get("cache_read_input_tokens").Int() != 4 || u.Get("service_tier").Str != "standard" {
					t.Fatalf("%s: %d %s", tc.cc, status, b)
				}
			}
		})
	}
}
