package e2e_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestOpenAPIDocumentRejectsWrongAnswers validates hand-made answers, one right and
// the others each breaking the contract in one way, against the document: it shows the
// document and the validator are strict enough for the contract test to fail.
func TestOpenAPIDocumentRejectsWrongAnswers(t *testing.T) {
	t.Parallel()
	v := openAPIValidator(t)
	const (
		id       = "0b6a4f7e-3c1d-4e2f-9a8b-7c6d5e4f3a2b"
		chatOK   = `{"id":"c1","object":"chat.completion","created":1,"model":"demo-chat","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
		denied   = `{"error":{"message":"No key.","type":"invalid_request_error","code":"invalid_api_key","retryable":false,"doc_url":"https://docs.llmgw.dev/errors#invalid_api_key"}}`
		limitErr = `{"error":{"message":"Slow down.","type":"rate_limit_error","code":"rate_limit_exceeded","retryable":true,"doc_url":"https://docs.llmgw.dev/errors#rate_limit_exceeded"}}`
	)
	jsonH := []string{"content-type", "application/json", "x-request-id", id}
	sse := []string{"content-type", "text/event-stream", "x-request-id", id}
	tests := []struct {
		name    string
		method  string
		path    string
		status  int
		headers []string
		body    string
		valid   bool
	}{
		{"a right chat completion", "POST", "/chat/completions", 200, jsonH, chatOK, true},
		{"a chat completion without choices", "POST", "/chat/completions", 200, jsonH,
			`{"id":"c1","object":"chat.completion","created":1,"model":"demo-chat"}`, false},
		{"a chat completion with a string created", "POST", "/chat/completions", 200, jsonH,
			strings.Replace(chatOK, `"created":1`, `"created":"1"`, 1), false},
		{"an answer without x-request-id", "POST", "/chat/completions", 200, jsonH[:2], chatOK, false},
		{"a right 401", "POST", "/chat/completions", 401, append([]string{"x-should-retry", "false"}, jsonH...), denied, true},
		{"a 401 with a string retryable", "POST", "/chat/completions", 401, append([]string{"x-should-retry", "false"}, jsonH...),
			strings.Replace(denied, `"retryable":false`, `"retryable":"false"`, 1), false},
		{"a 401 without x-should-retry", "POST", "/chat/completions", 401, jsonH, denied, false},
		{"a 401 with another status's code", "POST", "/chat/completions", 401, append([]string{"x-should-retry", "false"}, jsonH...),
			strings.Replace(denied, `"invalid_api_key"`, `"insufficient_credits"`, 1), false},
		{"the Anthropic envelope on an OpenAI route", "POST", "/chat/completions", 401, append([]string{"x-should-retry", "false"}, jsonH...),
			`{"type":"error","error":{"type":"authentication_error","message":"No key.","code":"invalid_api_key"}}`, false},
		{"the OpenAI envelope on an Anthropic route", "POST", "/messages", 401, append([]string{"x-should-retry", "false"}, jsonH...), denied, false},
		{"a right 429", "POST", "/responses", 429, append([]string{"x-should-retry", "true", "retry-after", "5"}, jsonH...), limitErr, true},
		{"a 429 with Retry-After 0", "POST", "/responses", 429, append([]string{"x-should-retry", "true", "retry-after", "0"}, jsonH...), limitErr, false},
		{"a 429 that is not retryable", "POST", "/responses", 429, append([]string{"x-should-retry", "true"}, jsonH...),
			strings.Replace(limitErr, `"retryable":true`, `"retryable":false`, 1), false},
		{"a right chat stream", "POST", "/chat/completions", 200, sse,
			"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"demo-chat\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n", true},
		{"a chat stream without [DONE]", "POST", "/chat/completions", 200, sse,
			"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"demo-chat\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n", false},
		{"a messages stream whose text_delta has no text", "POST", "/messages", 200, sse,
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\"}}\n\n", false},
		{"speech as text", "POST", "/audio/speech", 200, []string{"content-type", "text/plain", "x-request-id", id}, "RIFF", false},
		{"a status the operation does not declare", "POST", "/embeddings", 418, jsonH, `{}`, false},
		{"a model id with a space", "GET", "/models", 200, jsonH,
			`{"object":"list","data":[{"id":"demo chat","object":"model","created":1,"owned_by":"x"}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "http://127.0.0.1:8080/v1"+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tt.body))}
			for i := 0; i+1 < len(tt.headers); i += 2 {
				resp.Header.Set(tt.headers[i], tt.headers[i+1])
			}
			if ok, errs := v.ValidateHttpResponse(req, resp); ok != tt.valid {
				t.Errorf("valid = %v, want %v%s", ok, tt.valid, describe(errs))
			}
		})
	}
}
