package e2e_test

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestOpenAPIAnswersAreClosed keeps the document strict: every object schema with
// listed properties that an answer can reach (through properties, items, oneOf, anyOf,
// allOf, then, else and $ref) forbids other properties, by additionalProperties: false
// or, where subschemas add properties, unevaluatedProperties: false. An object schema
// without listed properties is a value whose fields the provider defines (tool
// arguments, metadata) and stays free-form.
//
// providerShaped are the answers the spec leaves to the provider ("request and
// response shapes: not shown"): the gateway passes them through and fixes only model.
var providerShaped = map[string]bool{"#/components/schemas/MultimodalEmbeddings": true}

func TestOpenAPIAnswersAreClosed(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	open := openAnswerSchemas(doc)
	if len(open) > 0 {
		t.Errorf("answer schemas that allow unlisted properties:\n  %s", strings.Join(open, "\n  "))
	}
}

// openAnswerSchemas walks every response of every operation and returns the
// locations of the object schemas that are not closed.
func openAnswerSchemas(doc map[string]any) []string {
	w := closedWalk{doc: doc, seen: map[string]bool{}, open: map[string]bool{}}
	for path, item := range asMap(doc["paths"]) {
		for method, op := range asMap(item) {
			for status, resp := range asMap(asMap(op)["responses"]) {
				r := w.resolve(resp)
				for mt, media := range asMap(r["content"]) {
					at := fmt.Sprintf("%s %s %s %s", method, path, status, mt)
					w.schema(asMap(media)["schema"], at, false)
				}
			}
		}
	}
	out := make([]string, 0, len(w.open))
	for at := range w.open {
		if providerShaped[at] {
			continue
		}
		out = append(out, at)
	}
	sort.Strings(out)
	return out
}

type closedWalk struct {
	doc  map[string]any
	seen map[string]bool // components already walked
	open map[string]bool
}

// resolve follows a local $ref of a response or schema.
func (w *closedWalk) resolve(v any) map[string]any {
	m := asMap(v)
	ref, ok := m["$ref"].(string)
	if !ok {
		return m
	}
	var cur any = w.doc
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		cur = asMap(cur)[part]
	}
	return asMap(cur)
}

// schema checks one schema at location at; applied says it is (or is inside) a
// subschema (allOf member, then, else) that only narrows properties the schema it
// applies to lists and closes.
func (w *closedWalk) schema(v any, at string, applied bool) {
	m := asMap(v)
	if m == nil {
		return
	}
	if ref, ok := m["$ref"].(string); ok {
		if w.seen[ref] {
			return
		}
		w.seen[ref] = true
		w.schema(w.resolve(m), ref, false)
		return
	}
	props := asMap(m["properties"])
	if len(props) > 0 && !applied && m["additionalProperties"] != false && m["unevaluatedProperties"] != false {
		w.open[at] = true
	}
	for name, p := range props {
		w.schema(p, at+"/properties/"+name, applied)
	}
	w.schema(m["items"], at+"/items", applied)
	for _, k := range []string{"oneOf", "anyOf"} {
		for i, s := range asSlice(m[k]) {
			w.schema(s, fmt.Sprintf("%s/%s/%d", at, k, i), applied)
		}
	}
	for i, s := range asSlice(m["allOf"]) {
		w.schema(s, fmt.Sprintf("%s/allOf/%d", at, i), true)
		w.schema(asMap(s)["then"], fmt.Sprintf("%s/allOf/%d/then", at, i), true)
	}
	w.schema(m["then"], at+"/then", true)
	w.schema(m["else"], at+"/else", true)
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
