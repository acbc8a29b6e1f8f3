package e2e_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/content"
	oaerrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/tidwall/gjson"
)

// This file checks docs/openapi.yaml, the API reference, against the gateway's real
// answers: every request and answer of TestOpenAPIDocumentMatchesTheGateway is
// validated (status, headers, body) by libopenapi-validator, a maintained OpenAPI 3.1
// validator, and TestOpenAPIDocumentRejectsWrongAnswers shows that the document is
// strict enough to catch answers that break the contract.

// openAPIPath is the document, relative to this package.
const openAPIPath = "../docs/openapi.yaml"

// loadOpenAPI parses the document once and builds its validator. Every body media type
// the document declares has a decoder, and the validator refuses one without: no body
// escapes validation silently.
var loadOpenAPI = sync.OnceValues(func() (validator.Validator, error) {
	spec, err := os.ReadFile(openAPIPath)
	if err != nil {
		return nil, err
	}
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		return nil, err
	}
	opts := []config.Option{
		config.WithFormatAssertions(),
		config.WithRejectUnsupportedBodyContent(),
		config.WithBodyDecoder("text/event-stream", content.DecoderFunc(decodeEventStream)),
	}
	for _, mt := range []string{"audio/*", "application/octet-stream"} {
		opts = append(opts, config.WithBodyDecoder(mt, content.BinaryDecoder()))
	}
	v, errs := validator.NewValidator(doc, opts...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("building the validator: %v", errs)
	}
	return v, nil
})

// decodeEventStream reads a text/event-stream body into the value the document's
// stream schemas describe: one item per event, with its event name (when it has one)
// and its data parsed as JSON, or the string "[DONE]". Events are split by the OpenAI
// SDK's own decoder, the one clients use.
func decodeEventStream(in *content.DecodeInput) (any, error) {
	dec := ssestream.NewDecoder(&http.Response{
		Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body:   io.NopCloser(in.Body),
	})
	var events []any
	for dec.Next() {
		ev := dec.Event()
		item := map[string]any{}
		if ev.Type != "" {
			item["event"] = ev.Type
		}
		data := bytes.TrimSuffix(ev.Data, []byte("\n"))
		switch {
		case string(data) == "[DONE]":
			item["data"] = "[DONE]"
		case gjson.ValidBytes(data):
			item["data"] = gjson.ParseBytes(data).Value()
		default:
			return nil, fmt.Errorf("event %d: data is neither JSON nor [DONE]: %q", len(events), data)
		}
		events = append(events, item)
	}
	return events, dec.Err()
}

func openAPIValidator(t *testing.T) validator.Validator {
	t.Helper()
	v, err := loadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// describe renders validation errors with the schema failures under them.
func describe(errs []*oaerrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  %s: %s", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n    %s at %s", f.Reason, f.KeywordLocation)
		}
	}
	return b.String()
}

// apiCall is one request of the contract test and what the gateway must answer.
type apiCall struct {
	name    string
	method  string
	path    string
	headers []string // name, value pairs
	body    []byte
	// conforms says whether the request itself follows the document: a request the
	// document calls invalid must be one the gateway refuses.
	conforms bool
	status   int
	code     string // the error code; empty for a success
}

// newRequest builds the call's request to the gateway.
func (c apiCall) newRequest(t *testing.T) *http.Request {
	t.Helper()
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, gw.BaseURL+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.body != nil {
		req.Header.Set("content-type", "application/json")
	}
	return req
}

// check sends the call, validates request and answer against the document, and
// returns the answer's body.
func (c apiCall) check(t *testing.T, v validator.Validator) []byte {
	t.Helper()
	req := c.newRequest(t)
	for i := 0; i+1 < len(c.headers); i += 2 {
		req.Header.Set(c.headers[i], c.headers[i+1])
	}
	if ok, errs := v.ValidateHttpRequestSync(req); ok != c.conforms {
		t.Errorf("the document says the request conforms: %v, want %v%s", ok, c.conforms, describe(errs))
	}
	status, h, body := send(t, c.newRequest(t), c.headers...)
	if code := gjson.GetBytes(body, "error.code").String(); status != c.status || code != c.code {
		t.Fatalf("answer %d %q, want %d %q: %s", status, code, c.status, c.code, body)
	}
	resp := &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewReader(body))}
	if ok, errs := v.ValidateHttpResponse(c.newRequest(t), resp); !ok {
		t.Errorf("the answer does not follow the document:%s\nheaders %v\nbody %.2000s", describe(errs), h, body)
	}
	return body
}

func bearer(key string) []string { return []string{"authorization", "Bearer " + key} }

// anthropicHeaders are the headers the Anthropic SDK sends.
func anthropicHeaders(key string) []string {
	return []string{"x-api-key", key, "anthropic-version", "2023-06-01"}
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	if ok, errs := openAPIValidator(t).ValidateDocument(); !ok {
		t.Fatalf("%s is not a valid OpenAPI document:%s", openAPIPath, describe(errs))
	}
}

// TestOpenAPIDocumentMatchesTheGateway sends a success and the typical refusals of
// every endpoint, in both envelopes, and validates each request and answer.
func TestOpenAPIDocumentMatchesTheGateway(t *testing.T) {
	t.Parallel()
	v := openAPIValidator(t)
	paid := newCustomer(t, customerOpts{topup: "10"})
	free := newCustomer(t, customerOpts{})
	poor := newCustomer(t, customerOpts{topup: "0.000001"})
	limited := newCustomer(t, customerOpts{topup: "10", keyArgs: []string{"--daily-limit", "0.000001"}})

	big := func(prefix, suffix string) []byte {
		return append(append([]byte(prefix), bytes.Repeat([]byte("a"), 2<<20)...), suffix...)
	}
	msg := func(extra string) []byte {
		return []byte(`{"model":"demo-claude","max_tokens":16,` + extra + `"messages":[{"role":"user","content":"hi [[mock:tokens=3]]"}]}`)
	}
	calls := []apiCall{
		// Chat completions.
		{name: "chat", method: "POST", path: "/chat/completions", headers: bearer(paid.key),
			body: chatBody("demo-chat", `"max_tokens":16`), conforms: true, status: 200},
		{name: "chat stream", method: "POST", path: "/chat/completions", headers: bearer(paid.key),
			body: chatBody("demo-chat", `"stream":true,"stream_options":{"include_usage":true}`), conforms: true, status: 200},
		{name: "chat without key", method: "POST", path: "/chat/completions",
			body: chatBody("demo-chat", ""), status: 401, code: "invalid_api_key"},
		{name: "chat unknown model", method: "POST", path: "/chat/completions", headers: bearer(paid.key),
			body: chatBody("no-such-model", ""), conforms: true, status: 403, code: "model_not_available"},
		{name: "chat paid model without top-up", method: "POST", path: "/chat/completions", headers: bearer(free.key),
			body: chatBody("demo-chat", ""), conforms: true, status: 403, code: "model_requires_topup"},
		{name: "chat malformed JSON", method: "POST", path: "/chat/completions", headers: bearer(paid.key),
			body: []byte(`{"model":`), status: 400, code: "invalid_request"},
		{name: "chat max_tokens 0", method: "POST", path: "/chat/completions", headers: bearer(paid.key),
			body: chatBody("demo-chat", `"max_tokens":0`), status: 400, code: "invalid_max_tokens"},
		{name: "chat too large", method: "POST", path: "/chat/completions", headers: bearer(paid.key),
			body: big(`{"model":"demo-chat","messages":[{"role":"user","content":"`, `"}]}`), conforms: true, status: 413, code: "request_body_too_large"},
		{name: "chat insufficient credits", method: "POST", path: "/chat/completions", headers: bearer(poor.key),
			body: chatBody("demo-chat", ""), conforms: true, status: 402, code: "insufficient_credits"},
		{name: "chat key limit", method: "POST", path: "/chat/completions", headers: bearer(limited.key),
			body: chatBody("demo-chat", ""), conforms: true, status: 429, code: "key_limit_reached"},
		{name: "chat unpriced", method: "POST", path: "/chat/completions", headers: bearer(paid.key),
			body: chatBody("demo-unpriced", ""), conforms: true, status: 503, code: "pricing_unavailable"},
		{name: "chat upstream out of funds", method: "POST", path: "/chat/completions", headers: bearer(paid.key),
			body: chatBody("demo-exhausted", ""), conforms: true, status: 503, code: "upstream_account_unavailable"},
		{name: "chat broken upstream", method: "POST", path: "/chat/completions", headers: bearer(paid.key),
			body: chatBody("demo-broken", ""), conforms: true, status: 502, code: "upstream_error"},

		// Responses.
		{name: "responses", method: "POST", path: "/responses", headers: []string{"x-api-key", paid.key},
			body: []byte(`{"model":"demo-responses","input":"hi [[mock:tokens=3]]","max_output_tokens":16}`), conforms: true, status: 200},
		{name: "responses stream", method: "POST", path: "/responses", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-responses","input":"hi [[mock:tokens=3]]","stream":true}`), conforms: true, status: 200},
		{name: "responses temperature out of range", method: "POST", path: "/responses", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-responses","input":"hi","temperature":3}`), status: 400, code: "invalid_request"},

		// Anthropic Messages and token counting.
		{name: "messages", method: "POST", path: "/messages", headers: anthropicHeaders(paid.key),
			body: msg(""), conforms: true, status: 200},
		{name: "messages stream", method: "POST", path: "/messages", headers: anthropicHeaders(paid.key),
			body: msg(`"stream":true,`), conforms: true, status: 200},
		{name: "messages without key", method: "POST", path: "/messages", headers: []string{"anthropic-version", "2023-06-01"},
			body: msg(""), status: 401, code: "invalid_api_key"},
		{name: "messages without max_tokens", method: "POST", path: "/messages", headers: anthropicHeaders(paid.key),
			body: []byte(`{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`), status: 400, code: "invalid_max_tokens"},
		{name: "messages unknown model", method: "POST", path: "/messages", headers: anthropicHeaders(paid.key),
			body: []byte(`{"model":"no-such-model","max_tokens":16,"messages":[{"role":"user","content":"x"}]}`), conforms: true, status: 403, code: "model_not_available"},
		{name: "messages insufficient credits", method: "POST", path: "/messages", headers: anthropicHeaders(poor.key),
			body: msg(""), conforms: true, status: 402, code: "insufficient_credits"},
		{name: "messages too large", method: "POST", path: "/messages", headers: anthropicHeaders(paid.key),
			body: big(`{"model":"demo-claude","max_tokens":16,"messages":[{"role":"user","content":"`, `"}]}`), conforms: true, status: 413, code: "request_body_too_large"},
		{name: "count_tokens", method: "POST", path: "/messages/count_tokens", headers: anthropicHeaders(paid.key),
			body: []byte(`{"model":"demo-claude","messages":[{"role":"user","content":"count these words"}]}`), conforms: true, status: 200},
		{name: "count_tokens no messages", method: "POST", path: "/messages/count_tokens", headers: anthropicHeaders(paid.key),
			body: []byte(`{"model":"demo-claude","messages":[]}`), status: 400, code: "invalid_request"},
		{name: "count_tokens without top-up", method: "POST", path: "/messages/count_tokens", headers: bearer(free.key),
			body: []byte(`{"model":"demo-claude","messages":[{"role":"user","content":"x"}]}`), conforms: true, status: 403, code: "model_requires_topup"},

		// Embeddings.
		{name: "embeddings float", method: "POST", path: "/embeddings", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-embed","input":["one","two"],"dimensions":4}`), conforms: true, status: 200},
		{name: "embeddings base64", method: "POST", path: "/embeddings", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-embed","input":"one","encoding_format":"base64"}`), conforms: true, status: 200},
		{name: "embeddings without input", method: "POST", path: "/embeddings", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-embed"}`), status: 400, code: "invalid_request"},
		{name: "multimodal embeddings stream", method: "POST", path: "/embeddings/multimodal", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-embed","input":[{"type":"text","text":"x"}],"stream":true}`), status: 400, code: "invalid_request"},

		// Speech, images, video.
		{name: "speech mp3", method: "POST", path: "/audio/speech", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-tts","input":"hello","voice":"alloy"}`), conforms: true, status: 200},
		{name: "speech wav", method: "POST", path: "/audio/speech", headers: []string{"x-api-key", paid.key},
			body: []byte(`{"model":"demo-tts","input":"hello","voice":"verse","response_format":"wav"}`), conforms: true, status: 200},
		{name: "speech voice of no model", method: "POST", path: "/audio/speech", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-tts","input":"hello","voice":"nova"}`), conforms: true, status: 400, code: "invalid_request"},
		{name: "image url", method: "POST", path: "/images/generations", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-image","prompt":"a lighthouse","response_format":"url"}`), conforms: true, status: 200},
		{name: "image b64_json", method: "POST", path: "/images/generations", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-image","prompt":"a lighthouse","response_format":"b64_json"}`), conforms: true, status: 200},
		{name: "images n 2", method: "POST", path: "/images/generations", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-image","prompt":"x","n":2}`), status: 400, code: "invalid_n"},
		{name: "video duration out of range", method: "POST", path: "/video/generations", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-video","prompt":"x","duration":16}`), conforms: true, status: 400, code: "invalid_duration"},
		{name: "video task unknown", method: "GET", path: "/videos/vtask_nosuchtask", headers: bearer(paid.key),
			conforms: true, status: 404, code: "task_not_found"},
		{name: "video task id with a dollar", method: "GET", path: "/videos/bad$id", headers: bearer(paid.key),
			status: 400, code: "invalid_task_id"},

		// Models.
		{name: "models without key", method: "GET", path: "/models", conforms: true, status: 200},
		{name: "models with key", method: "GET", path: "/models", headers: []string{"x-api-key", free.key}, conforms: true, status: 200},
		{name: "models unknown key", method: "GET", path: "/models", headers: bearer("gw-unknown"), conforms: true, status: 401, code: "invalid_api_key"},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) { c.check(t, v) })
	}

	t.Run("video task", func(t *testing.T) {
		submit := apiCall{method: "POST", path: "/video/generations", headers: bearer(paid.key),
			body: []byte(`{"model":"demo-video","prompt":"a cat surfing","duration":2}`), conforms: true, status: 200}
		id := gjson.GetBytes(submit.check(t, v), "id").String()
		read := apiCall{method: "GET", path: "/videos/" + id, headers: bearer(paid.key), conforms: true, status: 200}
		read.check(t, v)
	})

	for _, c := range []customer{paid, free, poor, limited} {
		if acc := c.waitSettled(t); micros(t, acc, "balance") != micros(t, acc, "available") {
			t.Errorf("a hold is left: %v", acc)
		}
	}
}
