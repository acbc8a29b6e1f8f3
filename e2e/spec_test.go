package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/testkit"
)

// This file checks the API contract (docs/api.md) rule by rule
// with raw HTTP: envelopes field by field, stream typing, the body limit at its exact
// edge and with chunked bodies, the key header forms, GET /models, method mismatches
// and the video task id and retention rules.

// rawChunked sends body without a Content-Length (Transfer-Encoding: chunked).
func rawChunked(t *testing.T, path string, body []byte, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, gw.BaseURL+path, struct{ io.Reader }{bytes.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1 // unknown: the transport sends the body chunked
	req.Header.Set("content-type", "application/json")
	return send(t, req, headers...)
}

// checkParam asserts the OpenAI envelope's optional param: the field's name when one is
// at fault, otherwise absent (the spec types it as a string: never null).
func checkParam(t *testing.T, body []byte, want string) {
	t.Helper()
	var env struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	raw, ok := env.Error["param"]
	switch {
	case want == "" && ok:
		t.Errorf("param = %s, want it absent (%s)", raw, body)
	case want != "" && string(raw) != `"`+want+`"`:
		t.Errorf("param = %s, want %q (%s)", raw, want, body)
	}
}

func checkAnthropicError(t *testing.T, status int, h http.Header, body []byte, wantStatus int, wantType, wantCode string) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("status = %d, want %d (%s)", status, wantStatus, body)
	}
	var env testkit.ErrorEnvelope
	if err := json.Unmarshal(body, &env); err != nil || env.Type != "error" || env.Error.Type != wantType || env.Error.Code != wantCode || env.Error.Message == "" {
		t.Errorf("envelope = %s, want type %s code %s", body, wantType, wantCode)
	}
	if ct := h.Get("content-type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("content-type = %q", ct)
	}
}

// padTo pads a JSON object with trailing whitespace to exactly n bytes.
func padTo(t *testing.T, body string, n int) []byte {
	t.Helper()
	if len(body) > n {
		t.Fatalf("body longer than %d", n)
	}
	return []byte(body + strings.Repeat(" ", n-len(body)))
}

func TestSpecStreamTyping(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	for _, tc := range []struct {
		name, path, body string
		anthropic        bool
	}{
		{"chat null", "/chat/completions", `{"model":"demo-chat","stream":null,"messages":[{"role":"user","content":"x"}]}`, false},
		{"responses null", "/responses", `{"model":"demo-responses","stream":null,"input":"x"}`, false},
		{"responses number", "/responses", `{"model":"demo-responses","stream":0,"input":"x"}`, false},
		{"messages null", "/messages", `{"model":"demo-claude","max_tokens":5,"stream":null,"messages":[{"role":"user","content":"x"}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := rawRequest(t, http.MethodPost, tc.path, c.key, []byte(tc.body))
			if tc.anthropic {
				checkAnthropicError(t, status, h, body, 400, "invalid_request_error", "invalid_stream")
				return
			}
			checkOpenAIError(t, status, h, body, 400, "invalid_stream", "invalid_request_error", false)
			checkParam(t, body, "stream")
		})
	}
	// false stays accepted on every streaming endpoint.
	status, _, body := rawRequest(t, http.MethodPost, "/responses", c.key, []byte(`{"model":"demo-responses","stream":false,"input":"x"}`))
	if status != 200 {
		t.Errorf("stream false: %d %s", status, body)
	}
}

func TestSpecOpenAIEnvelopeParam(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	for _, tc := range []struct {
		name, method, path, key, body string
		status                        int
		code, typ, param              string
	}{
		{"no key", "POST", "/chat/completions", "", `{"model":"demo-chat","messages":[{"role":"user","content":"x"}]}`, 401, "invalid_api_key", "invalid_request_error", ""},
		{"malformed json", "POST", "/embeddings", c.key, `{"model":`, 400, "invalid_request", "invalid_request_error", ""},
		{"field at fault", "POST", "/embeddings", c.key, `{"model":"demo-embed","input":"x","dimensions":0}`, 400, "invalid_request", "invalid_request_error", "dimensions"},
		{"wrong method", "GET", "/images/generations", c.key, "", 405, "method_not_allowed", "invalid_request_error", ""},
		{"unknown task", "GET", "/videos/no-such-task", c.key, "", 404, "task_not_found", "invalid_request_error", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b []byte
			if tc.body != "" {
				b = []byte(tc.body)
			}
			status, h, body := rawRequest(t, tc.method, tc.path, tc.key, b)
			checkOpenAIError(t, status, h, body, tc.status, tc.code, tc.typ, false)
			checkParam(t, body, tc.param)
		})
	}
}

// TestSpecBodyLimit: 2 MiB is accepted exactly; one byte more is 413
// request_body_too_large with or without Content-Length, in the envelope of the path
// (OpenAI's, or Anthropic's on /messages and /messages/count_tokens). Whitespace
// padding keeps the prompt (and the answer) short.
func TestSpecBodyLimit(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	const limit = 2 << 20
	chat := `{"model":"demo-chat","messages":[{"role":"user","content":"x"}]}`
	count := `{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`

	for _, chunked := range []bool{false, true} {
		post := func(path string, body []byte, headers ...string) (int, http.Header, []byte) {
			if chunked {
				return rawChunked(t, path, body, headers...)
			}
			return rawRequest(t, http.MethodPost, path, "", body, headers...)
		}
		name := "content-length"
		if chunked {
			name = "chunked"
		}
		t.Run(name, func(t *testing.T) {
			status, _, body := post("/chat/completions", padTo(t, chat, limit), "authorization", "Bearer "+c.key)
			if status != 200 {
				t.Errorf("exactly 2 MiB: %d %s", status, body)
			}
			status, h, body := post("/chat/completions", padTo(t, chat, limit+1), "authorization", "Bearer "+c.key)
			checkOpenAIError(t, status, h, body, 413, "request_body_too_large", "invalid_request_error", false)
			checkParam(t, body, "")

			status, _, body = post("/messages/count_tokens", padTo(t, count, limit), "x-api-key", c.key)
			if status != 200 || !strings.Contains(string(body), "input_tokens") {
				t.Errorf("count_tokens exactly 2 MiB: %d %s", status, body)
			}
			status, h, body = post("/messages/count_tokens", padTo(t, count, limit+1), "x-api-key", c.key)
			checkAnthropicError(t, status, h, body, 413, "request_too_large", "request_body_too_large")
			if h.Get("x-should-retry") != "false" {
				t.Errorf("x-should-retry = %q", h.Get("x-should-retry"))
			}
		})
	}
}

// TestSpecKeyHeaders: both header forms work, alone or together; other forms are
// invalid_api_key.
func TestSpecKeyHeaders(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	body := []byte(`{"model":"demo-chat","messages":[{"role":"user","content":"x"}]}`)
	for _, tc := range []struct {
		name    string
		headers []string
		ok      bool
	}{
		{"bearer", []string{"authorization", "Bearer " + c.key}, true},
		{"bearer lowercase scheme", []string{"authorization", "bearer " + c.key}, true},
		{"x-api-key", []string{"x-api-key", c.key}, true},
		{"both, same key", []string{"authorization", "Bearer " + c.key, "x-api-key", c.key}, true},
		{"authorization without scheme", []string{"authorization", c.key}, false},
		{"basic scheme", []string{"authorization", "Basic " + c.key}, false},
		{"x-api-key with bearer prefix", []string{"x-api-key", "Bearer " + c.key}, false},
		{"not a gateway key", []string{"x-api-key", "sk-mock-openai"}, false},
		{"two different keys", []string{"authorization", "Bearer " + c.key, "x-api-key", "gw-" + strings.Repeat("x", 43)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, b := rawRequest(t, http.MethodPost, "/chat/completions", "", body, tc.headers...)
			if tc.ok {
				if status != 200 {
					t.Errorf("status %d %s", status, b)
				}
				return
			}
			checkOpenAIError(t, status, h, b, 401, "invalid_api_key", "invalid_request_error", false)
		})
	}
	// On the Anthropic routes the same key forms, Anthropic's envelope.
	status, h, b := rawRequest(t, http.MethodPost, "/messages/count_tokens", "",
		[]byte(`{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`), "authorization", "Basic "+c.key)
	checkAnthropicError(t, status, h, b, 401, "authentication_error", "invalid_api_key")
	status, _, b = rawRequest(t, http.MethodPost, "/messages/count_tokens", c.key,
		[]byte(`{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`))
	if status != 200 {
		t.Errorf("count_tokens with Authorization: Bearer: %d %s", status, b)
	}
}

func TestSpecModelsShape(t *testing.T) {
	t.Parallel()
	status, h, body := rawRequest(t, http.MethodGet, "/models", "", nil)
	if status != 200 || !strings.HasPrefix(h.Get("content-type"), "application/json") {
		t.Fatalf("GET /models: %d %q %s", status, h.Get("content-type"), body)
	}
	var list struct {
		Object *string                      `json:"object"`
		Data   []map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil || list.Object == nil || len(list.Data) == 0 {
		t.Fatalf("GET /models body %s: %v", body, err)
	}
	for _, m := range list.Data {
		var id, object, ownedBy string
		var created float64
		if json.Unmarshal(m["id"], &id) != nil || json.Unmarshal(m["object"], &object) != nil ||
			json.Unmarshal(m["owned_by"], &ownedBy) != nil || json.Unmarshal(m["created"], &created) != nil {
			t.Errorf("model entry %v lacks a typed id, object, created or owned_by", m)
			continue
		}
		if id == "" || len(id) > 256 || strings.ContainsAny(id, " \t\n") || object == "" || ownedBy == "" {
			t.Errorf("model entry %v", m)
		}
	}
	status, h, body = rawRequest(t, http.MethodPost, "/models", "", []byte(`{}`))
	checkOpenAIError(t, status, h, body, 405, "method_not_allowed", "invalid_request_error", false)
	if h.Get("allow") != "GET" {
		t.Errorf("Allow = %q", h.Get("allow"))
	}
	status, h, body = rawRequest(t, http.MethodGet, "/messages", "", nil)
	checkAnthropicError(t, status, h, body, 405, "invalid_request_error", "method_not_allowed")
}

// TestSpecVideoTaskRules: ids of up to 200 characters from the allowed set are looked
// up (task_not_found when unknown), longer or other ids are invalid_task_id, and a task
// is task_not_found for a key of another account.
func TestSpecVideoTaskRules(t *testing.T) {
	t.Parallel()
	owner := newCustomer(t, customerOpts{topup: "10"})
	other := newCustomer(t, customerOpts{topup: "10"})
	for _, tc := range []struct {
		name, id string
		status   int
		code     string
	}{
		{"200 chars", strings.Repeat("a", 200), 404, "task_not_found"},
		{"201 chars", strings.Repeat("a", 201), 400, "invalid_task_id"},
		{"all allowed characters", "Az09.-_:x", 404, "task_not_found"},
		{"slash", "a/b", 400, "invalid_task_id"},
		{"percent", "a%25b", 400, "invalid_task_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := rawRequest(t, http.MethodGet, "/videos/"+tc.id, owner.key, nil)
			checkOpenAIError(t, status, h, body, tc.status, tc.code, "invalid_request_error", false)
		})
	}

	status, _, body := rawRequest(t, http.MethodPost, "/video/generations", owner.key, []byte(`{"model":"demo-video","prompt":"x","duration":2}`))
	if status != 200 {
		t.Fatalf("submit: %d %s", status, body)
	}
	var task struct{ ID string }
	if err := json.Unmarshal(body, &task); err != nil || task.ID == "" {
		t.Fatalf("submit body %s", body)
	}
	// Another account's key does not find it. (The 24-hour rule is not driven from
	// here: a task's age is the ledger owner's record, which no test can backdate.)
	status, h, body := rawRequest(t, http.MethodGet, "/videos/"+task.ID, other.key, nil)
	checkOpenAIError(t, status, h, body, 404, "task_not_found", "invalid_request_error", false)
}
