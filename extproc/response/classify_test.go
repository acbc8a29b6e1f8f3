package response

import (
	"testing"

	"github.com/llmgw/gateway/extproc/apierr"
)

func TestClassifyUpstream(t *testing.T) {
	tests := []struct {
		name        string
		format      Format
		status      int
		contentType string
		body        string
		want        apierr.Code
	}{
		// OpenAI error envelopes.
		{"openai exhausted quota", OpenAIChat, 429, "application/json", `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, apierr.UpstreamAccountUnavailable},
		{"openai billing not active", OpenAIChat, 429, "application/json; charset=utf-8", `{"error":{"message":"Your account is not active, please check your billing details on our website.","type":"billing_not_active","param":null,"code":"billing_not_active"}}`, apierr.UpstreamAccountUnavailable},
		{"openai upstream rate limit", OpenAIChat, 429, "application/json", `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 500.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, apierr.UpstreamAccountUnavailable},
		{"openai invalid key", OpenAIChat, 401, "application/json", `{"error":{"message":"Incorrect API key provided: sk-mock-x. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, apierr.UpstreamAccountUnavailable},
		{"openai deactivated account", OpenAIResponses, 401, "application/json", `{"error":{"message":"Your OpenAI account has been deactivated.","type":"invalid_request_error","param":null,"code":"account_deactivated"}}`, apierr.UpstreamAccountUnavailable},
		{"openai 401 without a body", OpenAIChat, 401, "", ``, apierr.UpstreamAccountUnavailable},
		{"openai unsupported region", OpenAIChat, 403, "application/json", `{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported","param":null,"type":"request_forbidden"}}`, apierr.UpstreamAccountUnavailable},
		{"openai no access to the model", OpenAIChat, 403, "application/json", `{"error":{"message":"Project proj_x does not have access to model gpt-4o","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, apierr.UpstreamAccountUnavailable},
		{"openai context too long", OpenAIChat, 400, "application/json", `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, apierr.InvalidRequest},
		{"openai unknown model", OpenAIChat, 404, "application/json", `{"error":{"message":"The model gpt-9 does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, apierr.UpstreamError},
		{"mock provider saw a gateway key", OpenAIChat, 400, "application/json", `{"error":{"message":"gateway key leaked to provider"}}`, apierr.UpstreamError},
		{"openai server error", OpenAIChat, 500, "application/json", `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`, apierr.UpstreamError},
		{"openai overloaded", OpenAIChat, 503, "application/json", `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`, apierr.ServiceUnavailable},
		{"openai 402 without envelope", OpenAIChat, 402, "text/plain", `payment required`, apierr.UpstreamAccountUnavailable},
		// Google (Gemini API, Vertex AI) error envelopes.
		{"gemini invalid argument", AnthropicMessages, 400, "application/json", `{"error":{"code":400,"message":"Invalid JSON payload received. Unknown name \"foo\": Cannot find field.","status":"INVALID_ARGUMENT"}}`, apierr.InvalidRequest},
		{"gemini billing not enabled", AnthropicMessages, 400, "application/json", `{"error":{"code":400,"message":"Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio.","status":"FAILED_PRECONDITION"}}`, apierr.UpstreamAccountUnavailable},
		{"gemini bad key", AnthropicMessages, 400, "application/json", `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`, apierr.UpstreamAccountUnavailable},
		{"vertex unauthenticated", AnthropicMessages, 401, "application/json", `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`, apierr.UpstreamAccountUnavailable},
		{"bedrock body without its type header", AnthropicMessages, 400, "application/json", `{"message":"Malformed input request"}`, apierr.UpstreamError},
		// Anthropic error envelopes.
		{"anthropic invalid key", AnthropicMessages, 401, "application/json", `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`, apierr.UpstreamAccountUnavailable},
		{"anthropic permission", AnthropicMessages, 403, "application/json", `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`, apierr.UpstreamAccountUnavailable},
		{"anthropic billing", AnthropicMessages, 402, "application/json", `{"type":"error","error":{"type":"billing_error","message":"Billing error"}}`, apierr.UpstreamAccountUnavailable},
		{"anthropic low credit balance", AnthropicMessages, 400, "application/json", `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`, apierr.UpstreamAccountUnavailable},
		{"anthropic invalid request", AnthropicMessages, 400, "application/json", `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`, apierr.InvalidRequest},
		{"anthropic request too large", AnthropicMessages, 413, "application/json", `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`, apierr.UpstreamError},
		{"anthropic rate limit", AnthropicMessages, 429, "application/json", `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, apierr.UpstreamAccountUnavailable},
		{"anthropic overloaded", AnthropicMessages, 529, "application/json", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, apierr.ServiceUnavailable},
		{"anthropic api error", AnthropicMessages, 500, "application/json", `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, apierr.UpstreamError},
		{"anthropic timeout", AnthropicMessages, 504, "application/json", `{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}`, apierr.UpstreamError},
		{"anthropic shape on an openai channel", OpenAIChat, 401, "application/json", `{"type":"error","error":{"type":"authentication_error","message":"x"}}`, apierr.UpstreamAccountUnavailable},
		// Envoy and other non-provider answers.
		{"envoy no healthy upstream", OpenAIChat, 503, "text/plain", `no healthy upstream`, apierr.ServiceUnavailable},
		{"envoy connect failure", AnthropicMessages, 503, "text/plain", `upstream connect error or disconnect/reset before headers. reset reason: connection failure`, apierr.ServiceUnavailable},
		{"503 without a body", OpenAIChat, 503, "", ``, apierr.ServiceUnavailable},
		{"envoy upstream timeout", OpenAIChat, 504, "text/plain", `upstream request timeout`, apierr.UpstreamError},
		{"html error page", OpenAIChat, 502, "text/html", `<html><body>Bad Gateway</body></html>`, apierr.UpstreamError},
		{"2xx html body", OpenAIChat, 200, "text/html", `<html>mock-broken</html>`, apierr.UpstreamError},
		{"2xx that did not parse", OpenAIChat, 200, "application/json", `{"choices":`, apierr.UpstreamError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyUpstream(tt.format, tt.status, tt.contentType, "", []byte(tt.body)); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestClassifyBedrock: Bedrock types its errors only in the x-amzn-ErrorType header
// (its body is {"message"}); each type of the Converse API reference, with the status
// Bedrock answers it with, maps as the other providers' errors of its kind.
func TestClassifyBedrock(t *testing.T) {
	const ns = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
	for _, tt := range []struct {
		errType string
		status  int
		want    apierr.Code
	}{
		{"ValidationException" + ns, 400, apierr.InvalidRequest},
		{"ValidationException", 400, apierr.InvalidRequest},
		{"com.amazon.coral.validate#ValidationException", 400, apierr.InvalidRequest},
		{"ServiceQuotaExceededException" + ns, 400, apierr.UpstreamAccountUnavailable},
		{"AccessDeniedException" + ns, 403, apierr.UpstreamAccountUnavailable},
		{"UnrecognizedClientException:http://internal.amazon.com/coral/com.amazon.coral.service/", 403, apierr.UpstreamAccountUnavailable},
		{"InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/", 403, apierr.UpstreamAccountUnavailable},
		{"ThrottlingException" + ns, 429, apierr.UpstreamAccountUnavailable},
		{"ModelNotReadyException" + ns, 429, apierr.ServiceUnavailable},
		{"ServiceUnavailableException" + ns, 503, apierr.ServiceUnavailable},
		{"ResourceNotFoundException" + ns, 404, apierr.UpstreamError},
		{"ModelTimeoutException" + ns, 408, apierr.UpstreamError},
		{"ModelErrorException" + ns, 424, apierr.UpstreamError},
		{"InternalServerException" + ns, 500, apierr.UpstreamError},
		{"SomethingNewException" + ns, 400, apierr.UpstreamError},
	} {
		t.Run(tt.errType, func(t *testing.T) {
			got := ClassifyUpstream(AnthropicMessages, tt.status, "application/json", tt.errType, []byte(`{"message":"words"}`))
			if got != tt.want {
				t.Fatalf("%d %s: got %s, want %s", tt.status, tt.errType, got, tt.want)
			}
		})
	}
}

func TestUsableSuccess(t *testing.T) {
	tests := []struct {
		name        string
		stream      bool
		status      int
		contentType string
		want        bool
	}{
		{"json", false, 200, "application/json", true},
		{"json with charset", false, 200, "application/json; charset=utf-8", true},
		{"json upper case", false, 200, "Application/JSON", true},
		{"sse", true, 200, "text/event-stream", true},
		{"sse with charset", true, 200, "text/event-stream; charset=utf-8", true},
		{"json where a stream was asked", true, 200, "application/json", false},
		{"sse where json was asked", false, 200, "text/event-stream", false},
		{"html", false, 200, "text/html", false},
		{"no content type", false, 200, "", false},
		{"not 2xx", false, 500, "application/json", false},
		{"3xx", false, 304, "application/json", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UsableSuccess(tt.stream, tt.status, tt.contentType); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
