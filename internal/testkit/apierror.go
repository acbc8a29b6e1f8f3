package testkit

import (
	"encoding/json"
	"testing"
)

// APIError is an error answer a test expects, as the API spec defines it: the status,
// error code and type, and where the spec gives them the field at fault (param), whether
// the client may retry (retryable, x-should-retry) and Retry-After. Build one with
// WantError and the With methods.
type APIError struct {
	Status     int
	Code, Type string
	Param      string
	Retryable  bool
	RetryAfter string
}

// WantError is the error status, code and type, not retryable and naming no field.
func WantError(status int, code, typ string) APIError {
	return APIError{Status: status, Code: code, Type: typ}
}

// WithParam names the request field at fault.
func (w APIError) WithParam(param string) APIError { w.Param = param; return w }

// WithRetry makes the error retryable, with Retry-After seconds ("" for none).
func (w APIError) WithRetry(retryAfter string) APIError {
	w.Retryable, w.RetryAfter = true, retryAfter
	return w
}

// Check asserts that status, headers (by lower-case name) and body are the error w in
// the OpenAI envelope, or in the Anthropic envelope when anthropic.
func (w APIError) Check(t testing.TB, status int, headers map[string]string, body []byte, anthropic bool) {
	t.Helper()
	if status != w.Status {
		t.Errorf("status = %d, want %d (body %s)", status, w.Status, body)
	}
	if headers["content-type"] != "application/json" {
		t.Errorf("content-type = %q", headers["content-type"])
	}
	wantRetry := "false"
	if w.Retryable {
		wantRetry = "true"
	}
	if headers["x-should-retry"] != wantRetry {
		t.Errorf("x-should-retry = %q, want %q", headers["x-should-retry"], wantRetry)
	}
	if headers["retry-after"] != w.RetryAfter {
		t.Errorf("retry-after = %q, want %q", headers["retry-after"], w.RetryAfter)
	}
	var env ErrorEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	e := env.Error
	if e.Code != w.Code || e.Type != w.Type || e.Message == "" {
		t.Errorf("error = %+v, want code %s type %s", e, w.Code, w.Type)
	}
	if anthropic {
		if env.Type != "error" || e.Retryable != nil || e.DocURL != "" {
			t.Errorf("not an Anthropic envelope: %s", body)
		}
		return
	}
	if e.Retryable == nil || *e.Retryable != w.Retryable {
		t.Errorf("retryable = %v, want %v", e.Retryable, w.Retryable)
	}
	if e.DocURL != "https://docs.llmgw.dev/errors#"+w.Code {
		t.Errorf("doc_url = %q", e.DocURL)
	}
	gotParam := ""
	if e.Param != nil {
		gotParam = *e.Param
	}
	if gotParam != w.Param {
		t.Errorf("param = %q, want %q", gotParam, w.Param)
	}
}

// Ptr is w's address, for a table whose nil entry means no error.
func (w APIError) Ptr() *APIError { return &w }
