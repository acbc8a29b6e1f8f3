// Package apierr is the one table of client-visible errors: each API error code with its
// HTTP status, OpenAI and Anthropic error types, whether it is retryable, and how it is
// rendered in the OpenAI envelope (with x-should-retry) or the Anthropic envelope.
//
// Messages are always ours: nothing from an upstream provider, a database or a stack
// trace ever reaches a client through this package. It depends only on the standard
// library.
package apierr

import (
	"encoding/json"
	"strconv"
)

// Code is an error code of the API (spec section 7).
type Code string

const (
	InvalidRequest             Code = "invalid_request"
	InvalidAPIKey              Code = "invalid_api_key"
	InsufficientCredits        Code = "insufficient_credits"
	RateLimitExceeded          Code = "rate_limit_exceeded"
	InternalError              Code = "internal_error"
	UpstreamError              Code = "upstream_error"
	ServiceUnavailable         Code = "service_unavailable"
	AccountSuspended           Code = "account_suspended"
	ModelRequiresTopUp         Code = "model_requires_topup"
	ModelNotAllowed            Code = "model_not_allowed"
	InvalidMaxTokens           Code = "invalid_max_tokens"
	InvalidStream              Code = "invalid_stream"
	InvalidN                   Code = "invalid_n"
	InvalidModel               Code = "invalid_model"
	ModelNotAvailable          Code = "model_not_available"
	RequestBodyTooLarge        Code = "request_body_too_large"
	PricingUnavailable         Code = "pricing_unavailable"
	KeyLimitReached            Code = "key_limit_reached"
	ConcurrencyLimitExceeded   Code = "concurrency_limit_exceeded"
	InvalidWebhookURL          Code = "invalid_webhook_url"
	InvalidDuration            Code = "invalid_duration"
	InvalidTaskID              Code = "invalid_task_id"
	UpstreamAccountUnavailable Code = "upstream_account_unavailable"
	TaskExpired                Code = "task_expired"
	TaskNotFound               Code = "task_not_found"
	ResolutionNotPriced        Code = "resolution_not_priced"
	// NotFound is the answer to an unknown path. The spec has no code for it; it is
	// rendered like invalid_request with status 404, as OpenAI does for unknown URLs.
	NotFound Code = "not_found"
	// MethodNotAllowed answers a known path called with the wrong method.
	MethodNotAllowed Code = "method_not_allowed"
)

// Spec describes how a code is answered.
type Spec struct {
	Status        int
	OpenAIType    string
	AnthropicType string
	// Retryable: the same request can succeed on retry (after any Retry-After).
	Retryable bool
}

// table is the single source of truth for status, types and retryability. Codes the
// spec gives no types for use the type of the nearest listed code with their status:
// 4xx client faults invalid_request_error (Anthropic: the status's own type), 403
// permission_error, 404 not_found_error, 413 request_too_large, 429 rate_limit_error,
// 503 api_error/overloaded_error.
var table = map[Code]Spec{
	InvalidRequest:             {400, "invalid_request_error", "invalid_request_error", false},
	InvalidAPIKey:              {401, "invalid_request_error", "authentication_error", false},
	InsufficientCredits:        {402, "invalid_request_error", "invalid_request_error", false},
	RateLimitExceeded:          {429, "rate_limit_error", "rate_limit_error", true},
	InternalError:              {500, "api_error", "api_error", false},
	UpstreamError:              {502, "api_error", "api_error", false},
	ServiceUnavailable:         {503, "api_error", "overloaded_error", false},
	AccountSuspended:           {403, "permission_error", "permission_error", false},
	ModelRequiresTopUp:         {403, "permission_error", "permission_error", false},
	ModelNotAllowed:            {403, "permission_error", "permission_error", false},
	InvalidMaxTokens:           {400, "invalid_request_error", "invalid_request_error", false},
	InvalidStream:              {400, "invalid_request_error", "invalid_request_error", false},
	InvalidN:                   {400, "invalid_request_error", "invalid_request_error", false},
	InvalidModel:               {400, "invalid_request_error", "invalid_request_error", false},
	ModelNotAvailable:          {403, "permission_error", "permission_error", false},
	RequestBodyTooLarge:        {413, "invalid_request_error", "request_too_large", false},
	PricingUnavailable:         {503, "api_error", "api_error", false},
	KeyLimitReached:            {429, "rate_limit_error", "rate_limit_error", true},
	ConcurrencyLimitExceeded:   {429, "rate_limit_error", "rate_limit_error", true},
	InvalidWebhookURL:          {400, "invalid_request_error", "invalid_request_error", false},
	InvalidDuration:            {400, "invalid_request_error", "invalid_request_error", false},
	InvalidTaskID:              {400, "invalid_request_error", "invalid_request_error", false},
	UpstreamAccountUnavailable: {503, "api_error", "overloaded_error", true},
	TaskExpired:                {404, "invalid_request_error", "not_found_error", false},
	TaskNotFound:               {404, "invalid_request_error", "not_found_error", false},
	ResolutionNotPriced:        {400, "invalid_request_error", "invalid_request_error", false},
	NotFound:                   {404, "invalid_request_error", "not_found_error", false},
	MethodNotAllowed:           {405, "invalid_request_error", "invalid_request_error", false},
}

// DocURL is the base of every error's doc_url; the code is appended as a fragment.
const DocURL = "https://docs.llmgw.dev/errors"

// Lookup returns the Spec of code; unknown codes are internal errors.
func Lookup(code Code) Spec {
	if s, ok := table[code]; ok {
		return s
	}
	return table[InternalError]
}

// Codes lists every code in the table, for tests.
func Codes() []Code {
	out := make([]Code, 0, len(table))
	for c := range table {
		out = append(out, c)
	}
	return out
}

// Error is a client-visible error.
type Error struct {
	Code    Code
	Message string
	// Param names the request field at fault, when one is (OpenAI envelope only).
	Param string
	// RetryAfter, in seconds, is sent as Retry-After when > 0.
	RetryAfter int
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// New returns an Error with a message.
func New(code Code, msg string) *Error { return &Error{Code: code, Message: msg} }

// Param returns an Error that names the field at fault.
func Param(code Code, param, msg string) *Error {
	return &Error{Code: code, Message: msg, Param: param}
}

// Envelope says which error body shape a route uses.
type Envelope int

const (
	OpenAI Envelope = iota
	Anthropic
)

// Header is one response header.
type Header struct{ Name, Value string }

// Response is a rendered error: status, headers and JSON body.
type Response struct {
	Status  int
	Headers []Header
	Body    []byte
}

type openAIBody struct {
	Error openAIError `json:"error"`
}

type openAIError struct {
	Message   string `json:"message"`
	Type      string `json:"type"`
	Code      Code   `json:"code"`
	Retryable bool   `json:"retryable"`
	// Param is present only when a request field is at fault: the spec types it as a
	// string, so it is omitted rather than null.
	Param  string `json:"param,omitempty"`
	DocURL string `json:"doc_url"`
}

type anthropicBody struct {
	Type  string         `json:"type"`
	Error anthropicError `json:"error"`
}

type anthropicError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Code    Code   `json:"code"`
}

// Render renders e in the envelope env.
func (e *Error) Render(env Envelope) Response {
	spec := Lookup(e.Code)
	h := []Header{{"content-type", "application/json"}}
	if spec.Retryable {
		h = append(h, Header{"x-should-retry", "true"})
	} else {
		h = append(h, Header{"x-should-retry", "false"})
	}
	if e.RetryAfter > 0 {
		h = append(h, Header{"retry-after", strconv.Itoa(e.RetryAfter)})
	}
	var body []byte
	if env == Anthropic {
		body, _ = json.Marshal(anthropicBody{Type: "error", Error: anthropicError{
			Type: spec.AnthropicType, Message: e.Message, Code: e.Code,
		}})
	} else {
		body, _ = json.Marshal(openAIBody{Error: openAIError{
			Message: e.Message, Type: spec.OpenAIType, Code: e.Code, Retryable: spec.Retryable,
			Param: e.Param, DocURL: DocURL + "#" + string(e.Code),
		}})
	}
	return Response{Status: spec.Status, Headers: h, Body: body}
}
