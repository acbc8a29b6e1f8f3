package apierr

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRenderOpenAI checks the OpenAI envelope field by field against the spec (section
// 7): message, type, code, retryable and doc_url always; param only when a field is at
// fault, and then as a string (never null); x-should-retry always; Retry-After when set.
func TestRenderOpenAI(t *testing.T) {
	tests := []struct {
		name        string
		err         *Error
		wantStatus  int
		wantBody    map[string]any
		wantHeaders []Header
	}{
		{
			name:       "no field at fault: param absent",
			err:        New(InvalidAPIKey, "Invalid API key."),
			wantStatus: 401,
			wantBody: map[string]any{"error": map[string]any{
				"message": "Invalid API key.", "type": "invalid_request_error", "code": "invalid_api_key",
				"retryable": false, "doc_url": "https://docs.llmgw.dev/errors#invalid_api_key",
			}},
			wantHeaders: []Header{{"content-type", "application/json"}, {"x-should-retry", "false"}},
		},
		{
			name:       "field at fault: param is its name",
			err:        Param(InvalidMaxTokens, "max_tokens", "bad"),
			wantStatus: 400,
			wantBody: map[string]any{"error": map[string]any{
				"message": "bad", "type": "invalid_request_error", "code": "invalid_max_tokens",
				"retryable": false, "param": "max_tokens", "doc_url": "https://docs.llmgw.dev/errors#invalid_max_tokens",
			}},
			wantHeaders: []Header{{"content-type", "application/json"}, {"x-should-retry", "false"}},
		},
		{
			name:       "retryable with Retry-After",
			err:        &Error{Code: ConcurrencyLimitExceeded, Message: "busy", RetryAfter: 5},
			wantStatus: 429,
			wantBody: map[string]any{"error": map[string]any{
				"message": "busy", "type": "rate_limit_error", "code": "concurrency_limit_exceeded",
				"retryable": true, "doc_url": "https://docs.llmgw.dev/errors#concurrency_limit_exceeded",
			}},
			wantHeaders: []Header{{"content-type", "application/json"}, {"x-should-retry", "true"}, {"retry-after", "5"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.err.Render(OpenAI)
			if r.Status != tt.wantStatus {
				t.Errorf("status %d, want %d", r.Status, tt.wantStatus)
			}
			var got map[string]any
			if err := json.Unmarshal(r.Body, &got); err != nil {
				t.Fatalf("body %s: %v", r.Body, err)
			}
			if d := cmp.Diff(tt.wantBody, got); d != "" {
				t.Errorf("body (-want +got)\n%s", d)
			}
			if d := cmp.Diff(tt.wantHeaders, r.Headers); d != "" {
				t.Errorf("headers (-want +got)\n%s", d)
			}
		})
	}
}

func TestRenderAnthropic(t *testing.T) {
	r := Param(InvalidAPIKey, "x", "Invalid API key.").Render(Anthropic)
	var got map[string]any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "error", "error": map[string]any{
		"type": "authentication_error", "message": "Invalid API key.", "code": "invalid_api_key",
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("body (-want +got)\n%s", d)
	}
	if r.Status != 401 {
		t.Errorf("status %d", r.Status)
	}
}

// TestSpecTable pins the status, types and retryability the spec's section 7 gives.
func TestSpecTable(t *testing.T) {
	tests := []struct {
		name string
		code Code
		want Spec
	}{
		{name: "invalid_request", code: InvalidRequest, want: Spec{400, "invalid_request_error", "invalid_request_error", false}},
		{name: "invalid_api_key", code: InvalidAPIKey, want: Spec{401, "invalid_request_error", "authentication_error", false}},
		{name: "insufficient_credits", code: InsufficientCredits, want: Spec{402, "invalid_request_error", "invalid_request_error", false}},
		{name: "rate_limit_exceeded", code: RateLimitExceeded, want: Spec{429, "rate_limit_error", "rate_limit_error", true}},
		{name: "internal_error", code: InternalError, want: Spec{500, "api_error", "api_error", false}},
		{name: "upstream_error", code: UpstreamError, want: Spec{502, "api_error", "api_error", false}},
		{name: "service_unavailable", code: ServiceUnavailable, want: Spec{503, "api_error", "overloaded_error", false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Lookup(tt.code); got != tt.want {
				t.Errorf("Lookup(%s) = %+v, want %+v", tt.code, got, tt.want)
			}
		})
	}
	statuses := map[Code]int{
		AccountSuspended: 403, ModelRequiresTopUp: 403, ModelNotAllowed: 403, ModelNotAvailable: 403,
		InvalidMaxTokens: 400, InvalidStream: 400, InvalidN: 400, InvalidModel: 400,
		RequestBodyTooLarge: 413, PricingUnavailable: 503, KeyLimitReached: 429,
		ConcurrencyLimitExceeded: 429, InvalidWebhookURL: 400, InvalidDuration: 400,
		InvalidTaskID: 400, UpstreamAccountUnavailable: 503, TaskExpired: 404, TaskNotFound: 404,
		ResolutionNotPriced: 400,
	}
	for code, st := range statuses {
		if got := Lookup(code).Status; got != st {
			t.Errorf("%s: status %d, want %d", code, got, st)
		}
	}
}
