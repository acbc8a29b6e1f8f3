package docs

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/llmgw/gateway/extproc/apierr"
)

// routeErrors are the error statuses each operation of openapi.yaml documents: what
// the route can answer (the spec's section 7 holds for every endpoint, less what a
// route cannot meet). Every route: 401, 403 and 429 (admission), 500 and 503 (Envoy's
// overload and the gateway's own failures). A body: 400, 408 (Envoy's request timeout)
// and 413. Billed: 402. A provider called: 502. A task read: 404. /models reads no
// body and calls no provider; count_tokens is neither billed nor sent upstream.
var routeErrors = map[string][]int{
	"POST /chat/completions":      {400, 401, 402, 403, 408, 413, 429, 500, 502, 503},
	"POST /responses":             {400, 401, 402, 403, 408, 413, 429, 500, 502, 503},
	"POST /messages":              {400, 401, 402, 403, 408, 413, 429, 500, 502, 503},
	"POST /messages/count_tokens": {400, 401, 403, 408, 413, 429, 500, 503},
	"POST /embeddings":            {400, 401, 402, 403, 408, 413, 429, 500, 502, 503},
	"POST /embeddings/multimodal": {400, 401, 402, 403, 408, 413, 429, 500, 502, 503},
	"POST /audio/speech":          {400, 401, 402, 403, 408, 413, 429, 500, 502, 503},
	"POST /images/generations":    {400, 401, 402, 403, 408, 413, 429, 500, 502, 503},
	"POST /video/generations":     {400, 401, 402, 403, 408, 413, 429, 500, 502, 503},
	"GET /videos/{taskId}":        {400, 401, 403, 404, 429, 500, 502, 503},
	"GET /models":                 {401, 403, 429, 500, 503},
}

// timeoutCode is the code of Envoy's 408, the one answer whose status is not its
// code's (envoy/envoy.yaml, local_reply_config: request_overall_timeout).
const timeoutCode = apierr.InvalidRequest

type node = map[string]any

func child(n any, keys ...string) any {
	for _, k := range keys {
		m, ok := n.(node)
		if !ok {
			return nil
		}
		n = m[k]
	}
	return n
}

// errorAnswer is what a documented error response says: its envelope and, for each
// code it allows, the error type and (OpenAI) retryable value it pins.
type errorAnswer struct {
	envelope string
	codes    map[string][2]string // code: type, retryable ("" when not pinned)
}

// readErrorAnswer reads a response of the form the document uses: allOf of an
// envelope's $ref and the properties of its error, whose code, type and retryable are
// pinned with const or enum, possibly in the alternatives of a oneOf.
func readErrorAnswer(t *testing.T, name string, resp any) errorAnswer {
	t.Helper()
	all, _ := child(resp, "content", "application/json", "schema", "allOf").([]any)
	if len(all) != 2 {
		t.Fatalf("%s: want allOf of an envelope and its error's properties", name)
	}
	ref, _ := child(all[0], "$ref").(string)
	a := errorAnswer{envelope: strings.TrimPrefix(ref, "#/components/schemas/"), codes: map[string][2]string{}}
	props, _ := child(all[1], "properties", "error").(node)
	alts := []any{props}
	if one, ok := props["oneOf"].([]any); ok {
		alts = one
	}
	pinned := func(alt any, field string) []string {
		f := child(props, "properties", field)
		if g := child(alt, "properties", field); g != nil {
			f = g
		}
		if c, ok := child(f, "const").(string); ok {
			return []string{c}
		}
		if b, ok := child(f, "const").(bool); ok {
			return []string{fmt.Sprint(b)}
		}
		var out []string
		if e, ok := child(f, "enum").([]any); ok {
			for _, v := range e {
				out = append(out, fmt.Sprint(v))
			}
		}
		return out
	}
	for _, alt := range alts {
		types, retry := pinned(alt, "type"), pinned(alt, "retryable")
		if len(types) != 1 || len(retry) > 1 {
			t.Errorf("%s: the error type (%v) and retryable (%v) must be pinned to one value", name, types, retry)
			continue
		}
		r := ""
		if len(retry) == 1 {
			r = retry[0]
		}
		for _, c := range pinned(alt, "code") {
			a.codes[c] = [2]string{types[0], r}
		}
	}
	if len(a.codes) == 0 {
		t.Errorf("%s: no code pinned", name)
	}
	return a
}

// TestOpenAPIErrorsPerRoute: every operation of openapi.yaml documents exactly its
// route's error statuses, each in its tag's envelope (OpenAI's, Anthropic's on
// /messages), and each code documented under a status is one the gateway answers with
// that status, with the error type (and, in the OpenAI envelope, the retryable) the
// gateway's error table gives it.
func TestOpenAPIErrorsPerRoute(t *testing.T) {
	raw, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	responses, _ := child(doc, "components", "responses").(node)
	paths, _ := doc["paths"].(node)
	seen := map[string]bool{}
	for path, item := range paths {
		for method, op := range item.(node) {
			route := strings.ToUpper(method) + " " + path
			want, ok := routeErrors[route]
			if !ok {
				t.Errorf("%s: not in routeErrors; add what it can answer", route)
				continue
			}
			seen[route] = true
			tags, _ := child(op, "tags").([]any)
			envelope := "OpenAIError"
			if slices.Contains(tags, any("Anthropic")) {
				envelope = "AnthropicError"
			}
			var got []int
			for status, resp := range child(op, "responses").(node) {
				var s int
				if _, err := fmt.Sscan(status, &s); err != nil || s < 400 {
					continue
				}
				got = append(got, s)
				ref, _ := child(resp, "$ref").(string)
				name := strings.TrimPrefix(ref, "#/components/responses/")
				r, ok := responses[name]
				if !ok {
					t.Errorf("%s %d: %q is not a component response", route, s, ref)
					continue
				}
				checkErrorAnswer(t, route, s, envelope, readErrorAnswer(t, name, r))
			}
			sort.Ints(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s documents error statuses %v, want %v", route, got, want)
			}
		}
	}
	for route := range routeErrors {
		if !seen[route] {
			t.Errorf("%s is in routeErrors but not in the document", route)
		}
	}
}

func checkErrorAnswer(t *testing.T, route string, status int, envelope string, a errorAnswer) {
	t.Helper()
	if a.envelope != envelope {
		t.Errorf("%s %d: envelope %s, want %s", route, status, a.envelope, envelope)
	}
	for code, pin := range a.codes {
		c := apierr.Code(code)
		if !slices.Contains(apierr.Codes(), c) {
			t.Errorf("%s %d: code %s is not one the gateway answers", route, status, code)
			continue
		}
		spec := apierr.Lookup(c)
		wantStatus := spec.Status
		if status == 408 && c == timeoutCode {
			wantStatus = 408
		}
		if wantStatus != status {
			t.Errorf("%s %d: code %s is answered with %d", route, status, code, spec.Status)
		}
		wantType := spec.OpenAIType
		if envelope == "AnthropicError" {
			wantType = spec.AnthropicType
		}
		if pin[0] != wantType {
			t.Errorf("%s %d: code %s documented as type %s, the gateway answers %s", route, status, code, pin[0], wantType)
		}
		if envelope == "OpenAIError" && pin[1] != fmt.Sprint(spec.Retryable) {
			t.Errorf("%s %d: code %s documented retryable %q, the gateway answers %v", route, status, code, pin[1], spec.Retryable)
		}
	}
}
