package response

import (
	"mime"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/restjson"
	"github.com/tidwall/gjson"

	"github.com/llmgw/gateway/extproc/apierr"
)

// UsableSuccess reports whether an upstream response with this status and content type
// can be rewritten and sent on as a success: a 2xx whose media type is what was asked
// (text/event-stream for a stream, JSON otherwise). Anything else goes to ClassifyUpstream.
func UsableSuccess(stream bool, status int, contentType string) bool {
	if status < 200 || status > 299 {
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	if stream {
		return mt == "text/event-stream"
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// ClassifyUpstream returns the API error code that answers an upstream response that is
// not sent on as a success (a non-2xx, or a 2xx that UsableSuccess or Write refused).
// Only the code is returned: the provider's message never reaches the client.
//
//   - The upstream account cannot serve → apierr.UpstreamAccountUnavailable: any 401
//     (OpenAI invalid_api_key, Anthropic authentication_error), 402 (Anthropic
//     billing_error), 403 (Anthropic permission_error; OpenAI request_forbidden such as
//     unsupported_country_region_territory, or no access to the model), 429 (OpenAI
//     insufficient_quota or billing_not_active, and rate limits of the upstream account,
//     which clear later), and an error of any status whose type or code is one of the
//     providers' account or billing errors, or an Anthropic invalid_request_error whose
//     message says the credit balance is too low.
//   - The upstream is down or overloaded → apierr.ServiceUnavailable: 503 (including
//     Envoy's own "no healthy upstream" and connect failures), 529 (Anthropic
//     overloaded_error), and an overloaded error of any status (Bedrock's 429
//     ModelNotReadyException).
//   - The provider rejected the request itself as invalid → apierr.InvalidRequest: a 400,
//     413 or 422 whose body is the provider's error envelope with type
//     invalid_request_error (for example a prompt over the context window).
//   - Anything else → apierr.UpstreamError: other 4xx and 5xx, bodies that are not the
//     provider's error envelope, and every 2xx that reaches this function.
//
// f selects the provider family whose shapes are expected; a body in the other family's
// envelope is recognised too. errorType is the answer's ErrorTypeHeader ("" without
// one): Bedrock names its error there only, and its type is read as the others' (the
// table awsErrors).
func ClassifyUpstream(f Format, status int, contentType, errorType string, body []byte) apierr.Code {
	if status >= 200 && status <= 299 {
		return apierr.UpstreamError
	}
	e := parseUpstreamError(body)
	if t, ok := awsErrors[restjson.SanitizeErrorCode(errorType)]; ok {
		e.typ = t
	}
	if e.accountProblem() {
		return apierr.UpstreamAccountUnavailable
	}
	if e.typ == "overloaded_error" {
		return apierr.ServiceUnavailable
	}
	switch status {
	case 401, 402, 403, 429:
		return apierr.UpstreamAccountUnavailable
	case 503, 529:
		return apierr.ServiceUnavailable
	case 400, 413, 422:
		if e.typ == "invalid_request_error" {
			return apierr.InvalidRequest
		}
	}
	return apierr.UpstreamError
}

// ErrorTypeHeader is the response header in which AWS services (Bedrock) name an
// error's type, as "ValidationException:http://internal.amazon.com/coral/…".
const ErrorTypeHeader = "x-amzn-errortype"

// AccountRefusal reports whether an upstream error body is the provider's own word that
// the account cannot serve (out of funds, unauthorized, forbidden), whatever its status:
// a 429 carrying it is an exhausted account, not a passing rate limit.
func AccountRefusal(body []byte) bool { return parseUpstreamError(body).accountProblem() }

// upstreamError is what ClassifyUpstream reads of a provider's error envelope.
type upstreamError struct {
	typ, code, message string
}

// parseUpstreamError reads an OpenAI {"error":{"type","code","message"}}, Anthropic
// {"type":"error","error":{"type","message"}} or Google {"error":{"code","message",
// "status"}} envelope; other bodies (Bedrock's {"message"}) give a zero value.
func parseUpstreamError(body []byte) upstreamError {
	if !gjson.ValidBytes(body) {
		return upstreamError{}
	}
	root := gjson.ParseBytes(body)
	errObj := root.Get("error")
	if !errObj.IsObject() {
		return upstreamError{}
	}
	e := upstreamError{
		typ:     errObj.Get("type").String(),
		message: errObj.Get("message").String(),
	}
	if c := errObj.Get("code"); c.Type == gjson.String {
		e.code = c.Str
	}
	if e.typ == "" {
		e.typ = googleErrors[errObj.Get("status").Str]
		// The Gemini API says a key is invalid with a 400 INVALID_ARGUMENT whose
		// details give the reason.
		errObj.Get("details").ForEach(func(_, d gjson.Result) bool {
			if strings.HasPrefix(d.Get("reason").Str, "API_KEY_") {
				e.typ = "authentication_error"
			}
			return true
		})
	}
	return e
}

// googleErrors are Google's error statuses (Gemini API, Vertex AI:
// {"error":{"code","message","status"}}) in the words of the types above.
// FAILED_PRECONDITION is how the Gemini API refuses a project without billing or in a
// region it does not serve.
var googleErrors = map[string]string{
	"INVALID_ARGUMENT":    "invalid_request_error",
	"UNAUTHENTICATED":     "authentication_error",
	"PERMISSION_DENIED":   "permission_error",
	"FAILED_PRECONDITION": "billing_error",
}

// awsErrors are Bedrock's error types (Converse API reference; the signature refusals of
// every AWS service) in the words of the types above.
var awsErrors = map[string]string{
	"ValidationException":                 "invalid_request_error",
	"AccessDeniedException":               "permission_error",
	"UnrecognizedClientException":         "authentication_error",
	"InvalidSignatureException":           "authentication_error",
	"MissingAuthenticationTokenException": "authentication_error",
	"ExpiredTokenException":               "authentication_error",
	"IncompleteSignatureException":        "authentication_error",
	// The account's quota: like OpenAI's insufficient_quota, it clears later.
	"ServiceQuotaExceededException": "insufficient_quota",
	"ThrottlingException":           "rate_limit_error",
	"ModelNotReadyException":        "overloaded_error",
	"ServiceUnavailableException":   "overloaded_error",
	"ResourceNotFoundException":     "not_found_error",
	"ModelTimeoutException":         "timeout_error",
	"ModelErrorException":           "api_error",
	"InternalServerException":       "api_error",
}

// accountErrors are the providers' error types and codes that mean the upstream account
// cannot serve requests, whatever the status.
var accountErrors = map[string]bool{
	// OpenAI
	"insufficient_quota":                   true,
	"billing_not_active":                   true,
	"billing_hard_limit_reached":           true,
	"invalid_api_key":                      true,
	"account_deactivated":                  true,
	"invalid_organization":                 true,
	"no_organization":                      true,
	"unsupported_country_region_territory": true,
	"request_forbidden":                    true,
	// Anthropic
	"authentication_error": true,
	"permission_error":     true,
	"billing_error":        true,
}

func (e upstreamError) accountProblem() bool {
	if accountErrors[e.typ] || accountErrors[e.code] {
		return true
	}
	// Anthropic reports an exhausted prepaid balance as a 400 invalid_request_error.
	if e.typ == "invalid_request_error" {
		m := strings.ToLower(e.message)
		return strings.Contains(m, "credit balance") || strings.Contains(m, "billing")
	}
	return false
}
