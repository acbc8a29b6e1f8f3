// Package testkit holds the fixtures that tests of several packages share: waiting for a
// condition, the API's error envelopes as a client decodes them, and Envoy header lists
// read as a map. It is for tests only; production code must not import it (a test here
// checks that none does).
package testkit

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// Deadline is how long a test waits for something that should happen promptly: long
// enough for a loaded machine, short enough to fail a hung test in reasonable time.
const Deadline = 10 * time.Second

// WaitFor polls cond until it holds, failing the test (naming what it waited for) when
// Deadline passes first.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Deadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ErrorEnvelope is the union of the API's two error bodies: OpenAI's
// {"error":{message,type,code,retryable,param,doc_url}} and Anthropic's
// {"type":"error","error":{type,message,code}}. Pointer fields tell a field that is
// absent (nil) from one that is present with its zero value.
type ErrorEnvelope struct {
	Type  string `json:"type"`
	Error struct {
		Message   string  `json:"message"`
		Type      string  `json:"type"`
		Code      string  `json:"code"`
		Retryable *bool   `json:"retryable"`
		Param     *string `json:"param"`
		DocURL    string  `json:"doc_url"`
	} `json:"error"`
}

// Headers are header values by name, in the order given.
type Headers map[string][]string

// Get is the first value of name ("" when absent).
func (h Headers) Get(name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// RawHeaders reads an Envoy header list by its raw_value fields: the only field Envoy
// reads in what ext_proc exchanges (since 1.32).
func RawHeaders(hs []*corev3.HeaderValue) Headers {
	out := Headers{}
	for _, h := range hs {
		out[h.GetKey()] = append(out[h.GetKey()], string(h.GetRawValue()))
	}
	return out
}

// MutationHeaders reads the set_headers of an ext_proc header mutation by name, failing
// the test on a header given in value rather than raw_value (Envoy reads only raw_value
// since 1.32) and on an append (every header extproc sets replaces the client's).
func MutationHeaders(t testing.TB, hm *extprocv3.HeaderMutation) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, h := range hm.GetSetHeaders() {
		if h.GetHeader().GetValue() != "" {
			t.Errorf("header %s set in value, not raw_value", h.GetHeader().GetKey())
		}
		//lint:ignore SA1019 ext_proc honours append, not append_action
		if h.GetAppend().GetValue() {
			t.Errorf("header %s appends", h.GetHeader().GetKey())
		}
		m[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
	}
	return m
}
