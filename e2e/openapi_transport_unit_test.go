package e2e_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// answerFunc is a RoundTripper answering every request with one canned answer.
type answerFunc func(*http.Request) *http.Response

func (f answerFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r), nil }

// TestAPITransportRecordsWrongAnswers drives apiTransport, the hook every e2e request
// goes through, with canned answers: a right answer passes, and an extra field, a wrong
// type or an unknown error code is recorded as a mismatch.
func TestAPITransportRecordsWrongAnswers(t *testing.T) {
	t.Parallel()
	const (
		prefix = "http://gateway.test/v1"
		id     = "0b6a4f7e-3c1d-4e2f-9a8b-7c6d5e4f3a2b"
		chat   = `{"id":"c1","object":"chat.completion","created":1,"model":"demo-chat","service_tier":"default",` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4,` +
			`"prompt_tokens_details":{"cached_tokens":2,"cache_write_tokens":1},"completion_tokens_details":{"reasoning_tokens":0}}}`
		denied = `{"error":{"message":"No key.","type":"invalid_request_error","code":"invalid_api_key","retryable":false,"doc_url":"https://docs.llmgw.dev/errors#invalid_api_key"}}`
		msg    = `{"id":"m1","type":"message","role":"assistant","model":"demo-claude","content":[{"type":"text","text":"hi"}],` +
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1,"cache_read_input_tokens":0,` +
			`"cache_creation_input_tokens":2,"cache_creation":{"ephemeral_5m_input_tokens":2,"ephemeral_1h_input_tokens":0},"service_tier":"standard"}}`
		chunk = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"demo-chat\",\"service_tier\":\"default\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"
	)
	tests := []struct {
		name, method, path string
		status             int
		headers            []string
		body               string
		readAll            bool
		mismatch           bool
	}{
		{"a right chat completion", "POST", "/chat/completions", 200, nil, chat, true, false},
		{"a chat completion with an extra field", "POST", "/chat/completions", 200, nil,
			strings.Replace(chat, `"created":1`, `"created":1,"surprise":true`, 1), true, true},
		{"an extra usage detail", "POST", "/chat/completions", 200, nil,
			strings.Replace(chat, `"cached_tokens":2`, `"cached_tokens":2,"free_tokens":9`, 1), true, true},
		{"a numeric service_tier", "POST", "/chat/completions", 200, nil,
			strings.Replace(chat, `"service_tier":"default"`, `"service_tier":1`, 1), true, true},
		{"a string token count", "POST", "/chat/completions", 200, nil,
			strings.Replace(chat, `"prompt_tokens":3`, `"prompt_tokens":"3"`, 1), true, true},
		{"a right 401", "POST", "/chat/completions", 401, []string{"x-should-retry", "false"}, denied, true, false},
		{"an unknown error code", "POST", "/chat/completions", 401, []string{"x-should-retry", "false"},
			strings.Replace(denied, `"invalid_api_key"`, `"key_mislaid"`, 1), true, true},
		{"another route's error code", "POST", "/chat/completions", 400, []string{"x-should-retry", "false"},
			strings.Replace(denied, `"invalid_api_key"`, `"invalid_duration"`, 1), true, true},
		{"a right 400 of a video", "POST", "/video/generations", 400, []string{"x-should-retry", "false"},
			strings.Replace(denied, `"invalid_api_key"`, `"invalid_duration"`, 1), true, false},
		{"an error with an extra field", "POST", "/chat/completions", 401, []string{"x-should-retry", "false"},
			strings.Replace(denied, `"retryable":false`, `"retryable":false,"hint":"x"`, 1), true, true},
		{"a right message", "POST", "/messages", 200, nil, msg, true, false},
		{"a message with a refusal stop reason", "POST", "/messages", 200, nil,
			strings.Replace(msg, `"end_turn"`, `"refusal"`, 1), true, true},
		{"an unknown Anthropic usage field", "POST", "/messages", 200, nil,
			strings.Replace(msg, `"service_tier":"standard"`, `"service_tier":"standard","bonus_tokens":1`, 1), true, true},
		{"a right chat stream", "POST", "/chat/completions", 200, []string{"content-type", "text/event-stream"}, chunk, true, false},
		{"a chunk with an extra field", "POST", "/chat/completions", 200, []string{"content-type", "text/event-stream"},
			strings.Replace(chunk, `"model"`, `"extra":1,"model"`, 1), true, true},
		{"a chat stream that failed after it began", "POST", "/chat/completions", 200, []string{"content-type", "text/event-stream"},
			"data: {\"error\":{\"message\":\"The upstream provider failed while streaming.\",\"type\":\"api_error\",\"code\":\"upstream_error\"}}\n\ndata: [DONE]\n\n", true, false},
		{"a stream error with an extra field", "POST", "/chat/completions", 200, []string{"content-type", "text/event-stream"},
			"data: {\"error\":{\"message\":\"Failed.\",\"type\":\"api_error\",\"trace\":\"x\"}}\n\ndata: [DONE]\n\n", true, true},
		{"a wrong answer read only in part", "POST", "/chat/completions", 200, nil, `{"surprise":true}`, false, false},
		{"a path outside the document", "GET", "/console/accounts", 200, nil, `{"anything":1}`, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &mismatchLog{}
			tr := newAPITransport(answerFunc(func(*http.Request) *http.Response {
				h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {id}}
				for i := 0; i+1 < len(tt.headers); i += 2 {
					h.Set(tt.headers[i], tt.headers[i+1])
				}
				return &http.Response{StatusCode: tt.status, Header: h, Body: io.NopCloser(strings.NewReader(tt.body))}
			}), prefix)
			tr.mismatches = log
			req, err := http.NewRequest(tt.method, prefix+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if tt.readAll {
				_, _ = io.ReadAll(resp.Body)
			} else {
				_, _ = resp.Body.Read(make([]byte, 4))
			}
			resp.Body.Close()
			if got := log.All(); (len(got) > 0) != tt.mismatch {
				t.Errorf("mismatches %q, want any: %v", got, tt.mismatch)
			}
		})
	}
}
