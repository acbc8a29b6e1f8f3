package wire

import (
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/tidwall/gjson"
)

// want is the expected outcome of a rule: no error (code ""), or the code and param.
type want struct {
	code  apierr.Code
	param string
}

func check(t *testing.T, err *apierr.Error, w want) {
	t.Helper()
	switch {
	case w.code == "" && err != nil:
		t.Fatalf("unexpected error %v (param %q)", err, err.Param)
	case w.code != "" && err == nil:
		t.Fatalf("no error, want %s on %q", w.code, w.param)
	case w.code != "" && (err.Code != w.code || err.Param != w.param):
		t.Fatalf("got %s on %q (%s), want %s on %q", err.Code, err.Param, err.Message, w.code, w.param)
	case err != nil && err.Message == "":
		t.Fatal("error without a message")
	}
}

func TestRoot(t *testing.T) {
	tests := []struct {
		name string
		body string
		want want
	}{
		{name: "object", body: `{"a":1}`},
		{name: "empty object", body: `{}`},
		{name: "empty body", body: ``, want: want{apierr.InvalidRequest, ""}},
		{name: "not JSON", body: `{"a":`, want: want{apierr.InvalidRequest, ""}},
		{name: "trailing garbage", body: `{"a":1} x`, want: want{apierr.InvalidRequest, ""}},
		{name: "array root", body: `[{"model":"m"}]`, want: want{apierr.InvalidRequest, ""}},
		{name: "string root", body: `"model"`, want: want{apierr.InvalidRequest, ""}},
		{name: "number root", body: `1`, want: want{apierr.InvalidRequest, ""}},
		{name: "null root", body: `null`, want: want{apierr.InvalidRequest, ""}},
		{name: "duplicate model", body: `{"model":"a","model":"b"}`, want: want{apierr.InvalidRequest, "model"}},
		{name: "duplicate apart", body: `{"stream":true,"x":1,"stream":false}`, want: want{apierr.InvalidRequest, "stream"}},
		{name: "nested repeat is not top-level", body: `{"a":{"k":1,"k":2},"k":3}`},
		{name: "duplicate after many keys", body: manyKeys(40) + `,"k7":0}`, want: want{apierr.InvalidRequest, "k7"}},
		{name: "many distinct keys", body: manyKeys(40) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, err := Root([]byte(tt.body))
			check(t, err, tt.want)
			if err == nil && !root.IsObject() {
				t.Fatal("root is not the object")
			}
		})
	}
}

// manyKeys returns an unterminated object with n distinct keys k0..k(n-1).
func manyKeys(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + itoa(i) + `":0`)
	}
	return b.String()
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestModel(t *testing.T) {
	invalid := want{apierr.InvalidModel, "model"}
	tests := []struct {
		name  string
		body  string
		model string
		want  want
	}{
		{name: "plain", body: `{"model":"gpt-4o"}`, model: "gpt-4o"},
		{name: "256 characters", body: `{"model":"` + strings.Repeat("m", 256) + `"}`, model: strings.Repeat("m", 256)},
		{name: "256 multibyte characters", body: `{"model":"` + strings.Repeat("é", 256) + `"}`, model: strings.Repeat("é", 256)},
		{name: "257 characters", body: `{"model":"` + strings.Repeat("m", 257) + `"}`, want: invalid},
		{name: "missing", body: `{}`, want: invalid},
		{name: "null", body: `{"model":null}`, want: invalid},
		{name: "empty", body: `{"model":""}`, want: invalid},
		{name: "number", body: `{"model":5}`, want: invalid},
		{name: "space", body: `{"model":"a b"}`, want: invalid},
		{name: "tab escape", body: `{"model":"a\tb"}`, want: invalid},
		{name: "no-break space", body: `{"model":"a\u00a0b"}`, want: invalid},
		{name: "ideographic space", body: "{\"model\":\"a\u3000b\"}", want: invalid},
		{name: "line separator", body: `{"model":"a\u2028"}`, want: invalid},
		{name: "zero-width space is not whitespace", body: `{"model":"a\u200bb"}`, model: "a\u200bb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, err := Root([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			m, err := Model(root)
			check(t, err, tt.want)
			if m != tt.model {
				t.Fatalf("model %q, want %q", m, tt.model)
			}
		})
	}
}

func TestValidModelIDInvalidUTF8(t *testing.T) {
	if ValidModelID("a\xffb") {
		t.Fatal("invalid UTF-8 accepted")
	}
}

func TestStream(t *testing.T) {
	invalid := want{apierr.InvalidStream, "stream"}
	tests := []struct {
		name   string
		body   string
		stream bool
		want   want
	}{
		{name: "absent", body: `{}`},
		{name: "null", body: `{"stream":null}`, want: invalid},
		{name: "true", body: `{"stream":true}`, stream: true},
		{name: "false", body: `{"stream":false}`},
		{name: "string true", body: `{"stream":"true"}`, want: invalid},
		{name: "one", body: `{"stream":1}`, want: invalid},
		{name: "zero", body: `{"stream":0}`, want: invalid},
		{name: "object", body: `{"stream":{}}`, want: invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Stream(object(t, tt.body))
			check(t, err, tt.want)
			if s != tt.stream {
				t.Fatalf("stream %v", s)
			}
		})
	}
}

func TestNoStream(t *testing.T) {
	tests := []struct {
		name string
		body string
		want want
	}{
		{name: "absent", body: `{}`},
		{name: "false", body: `{"stream":false}`},
		{name: "null", body: `{"stream":null}`},
		{name: "true", body: `{"stream":true}`, want: want{apierr.InvalidRequest, "stream"}},
		{name: "string", body: `{"stream":"true"}`, want: want{apierr.InvalidStream, "stream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, NoStream(object(t, tt.body), "Embeddings"), tt.want)
		})
	}
}

func TestPositiveInt(t *testing.T) {
	bad := want{apierr.InvalidMaxTokens, "max_tokens"}
	tests := []struct {
		name     string
		body     string
		required bool
		n        int64
		want     want
	}{
		{name: "one", body: `{"max_tokens":1}`, n: 1},
		{name: "large", body: `{"max_tokens":100000}`, n: 100000},
		{name: "2^53", body: `{"max_tokens":9007199254740992}`, n: 1 << 53},
		{name: "2^53+1", body: `{"max_tokens":9007199254740993}`, want: bad},
		{name: "huge", body: `{"max_tokens":99999999999999999999999}`, want: bad},
		{name: "zero", body: `{"max_tokens":0}`, want: bad},
		{name: "minus one", body: `{"max_tokens":-1}`, want: bad},
		{name: "minus zero", body: `{"max_tokens":-0}`, want: bad},
		{name: "one point zero", body: `{"max_tokens":1.0}`, want: bad},
		{name: "exponent", body: `{"max_tokens":1e3}`, want: bad},
		{name: "fraction", body: `{"max_tokens":1.5}`, want: bad},
		{name: "string", body: `{"max_tokens":"5"}`, want: bad},
		{name: "bool", body: `{"max_tokens":true}`, want: bad},
		{name: "absent optional", body: `{}`},
		{name: "null optional", body: `{"max_tokens":null}`},
		{name: "absent required", body: `{}`, required: true, want: bad},
		{name: "null required", body: `{"max_tokens":null}`, required: true, want: bad},
		{name: "present required", body: `{"max_tokens":7}`, required: true, n: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := PositiveInt(object(t, tt.body), "max_tokens", tt.required)
			check(t, err, tt.want)
			if n != tt.n {
				t.Fatalf("n = %d, want %d", n, tt.n)
			}
		})
	}
}

func TestRange(t *testing.T) {
	bad := want{apierr.InvalidRequest, "temperature"}
	tests := []struct {
		name string
		body string
		want want
	}{
		{name: "zero", body: `{"temperature":0}`},
		{name: "upper bound", body: `{"temperature":2}`},
		{name: "upper bound as 2.0", body: `{"temperature":2.0}`},
		{name: "just above", body: `{"temperature":2.0000001}`, want: bad},
		{name: "just below zero", body: `{"temperature":-0.0000001}`, want: bad},
		{name: "exponent inside", body: `{"temperature":1e-3}`},
		{name: "string", body: `{"temperature":"1"}`, want: bad},
		{name: "null", body: `{"temperature":null}`},
		{name: "absent", body: `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, Range(object(t, tt.body), "temperature", 0, 2), tt.want)
		})
	}
}

func TestIsIntegerLiteral(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want bool
	}{
		{name: "digits", raw: "123", want: true},
		{name: "negative", raw: "-4", want: true},
		{name: "empty", raw: ""},
		{name: "sign only", raw: "-"},
		{name: "fraction", raw: "1.0"},
		{name: "exponent", raw: "1e3"},
		{name: "plus", raw: "+1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsIntegerLiteral(tt.raw); got != tt.want {
				t.Fatalf("IsIntegerLiteral(%q) = %v", tt.raw, got)
			}
		})
	}
}

func TestOptionalRules(t *testing.T) {
	tests := []struct {
		name string
		rule func(Object) *apierr.Error
		body string
		want want
	}{
		{name: "string ok", rule: str("user"), body: `{"user":"u"}`},
		{name: "string null", rule: str("user"), body: `{"user":null}`},
		{name: "string number", rule: str("user"), body: `{"user":1}`, want: want{apierr.InvalidRequest, "user"}},
		{name: "object ok", rule: obj("metadata"), body: `{"metadata":{}}`},
		{name: "object array", rule: obj("metadata"), body: `{"metadata":[]}`, want: want{apierr.InvalidRequest, "metadata"}},
		{name: "string or object string", rule: strObj("tool_choice"), body: `{"tool_choice":"auto"}`},
		{name: "string or object object", rule: strObj("tool_choice"), body: `{"tool_choice":{"type":"function"}}`},
		{name: "string or object array", rule: strObj("tool_choice"), body: `{"tool_choice":[]}`, want: want{apierr.InvalidRequest, "tool_choice"}},
		{name: "object array ok", rule: objArr("tools"), body: `{"tools":[{},{}]}`},
		{name: "object array empty", rule: objArr("tools"), body: `{"tools":[]}`},
		{name: "object array with a string", rule: objArr("tools"), body: `{"tools":[{},"x"]}`, want: want{apierr.InvalidRequest, "tools"}},
		{name: "object array not array", rule: objArr("tools"), body: `{"tools":{}}`, want: want{apierr.InvalidRequest, "tools"}},
		{name: "n 1", rule: onlyOne, body: `{"n":1}`},
		{name: "n 1.0", rule: onlyOne, body: `{"n":1.0}`},
		{name: "n null", rule: onlyOne, body: `{"n":null}`},
		{name: "n 2", rule: onlyOne, body: `{"n":2}`, want: want{apierr.InvalidN, "n"}},
		{name: "n string", rule: onlyOne, body: `{"n":"1"}`, want: want{apierr.InvalidN, "n"}},
		{name: "required text", rule: text("prompt"), body: `{"prompt":"p"}`},
		{name: "required text empty", rule: text("prompt"), body: `{"prompt":""}`, want: want{apierr.InvalidRequest, "prompt"}},
		{name: "required text absent", rule: text("prompt"), body: `{}`, want: want{apierr.InvalidRequest, "prompt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, tt.rule(object(t, tt.body)), tt.want)
		})
	}
}

func str(f string) func(Object) *apierr.Error {
	return func(r Object) *apierr.Error { _, e := OptionalString(r, f); return e }
}
func obj(f string) func(Object) *apierr.Error {
	return func(r Object) *apierr.Error { return OptionalObject(r, f) }
}
func strObj(f string) func(Object) *apierr.Error {
	return func(r Object) *apierr.Error { return OptionalStringOrObject(r, f) }
}
func objArr(f string) func(Object) *apierr.Error {
	return func(r Object) *apierr.Error { _, e := OptionalObjectArray(r, f); return e }
}
func text(f string) func(Object) *apierr.Error {
	return func(r Object) *apierr.Error { _, e := RequiredText(r, f); return e }
}
func onlyOne(r Object) *apierr.Error { return OnlyOne(r, "only 1") }

func TestContentPart(t *testing.T) {
	tests := []struct {
		name string
		part string
		typ  string
		want want
	}{
		{name: "text", part: `{"type":"text","text":"hi"}`, typ: "text"},
		{name: "image without text", part: `{"type":"image_url","image_url":"x"}`, typ: "image_url"},
		{name: "not an object", part: `"hi"`, want: want{apierr.InvalidRequest, "p.type"}},
		{name: "no type", part: `{"text":"hi"}`, want: want{apierr.InvalidRequest, "p.type"}},
		{name: "number type", part: `{"type":1}`, want: want{apierr.InvalidRequest, "p.type"}},
		{name: "text not a string", part: `{"type":"text","text":5}`, want: want{apierr.InvalidRequest, "p.text"}},
		{name: "text null", part: `{"type":"text","text":null}`, want: want{apierr.InvalidRequest, "p.text"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			typ, err := ContentPart(Members(gjson.Parse(tt.part)), "p")
			check(t, err, tt.want)
			if typ != tt.typ {
				t.Fatalf("type %q", typ)
			}
		})
	}
}

func TestBegin(t *testing.T) {
	root, p, err := Begin([]byte(`{"model":"m","x":1}`))
	if err != nil || p.Model != "m" || root.Get("x").Int() != 1 {
		t.Fatalf("Begin: %v %+v", err, p)
	}
	if _, _, err := Begin([]byte(`{"model":"m","model":"m"}`)); err == nil || err.Param != "model" || err.Code != apierr.InvalidRequest {
		t.Fatalf("duplicate: %v", err)
	}
	if _, _, err := Begin([]byte(`{"model":" "}`)); err == nil || err.Code != apierr.InvalidModel {
		t.Fatalf("bad model: %v", err)
	}
}

// object is body's Root, which must succeed.
func object(t *testing.T, body string) Object {
	t.Helper()
	o, err := Root([]byte(body))
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return o
}

// TestObjectGet: a member found through the index is what gjson finds walking the body,
// for top-level names, absent names, dotted paths and other path syntax.
func TestObjectGet(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"a \"quoted\" \u00e9"}],"text":{"format":{"type":"json"}},` +
		`"metadata":{"user_id":"u"},"choices":[1,2],"na\u006de":true,"n":null,"stream":false,"empty":{}}`
	o := object(t, body)
	for _, path := range []string{"model", "messages", "text", "text.format", "text.format.type", "metadata.user_id",
		"choices.0", "choices.1", "choices.#", "name", "n", "stream", "empty", "absent", "absent.x", "messages.0.content",
		"messages.#.role", "text.absent", "model.x", `na\me`, "*", "m*"} {
		got, want := o.Get(path), gjson.Get(body, path)
		if got.Type != want.Type || got.Raw != want.Raw || got.Str != want.Str || got.Num != want.Num {
			t.Errorf("Get(%q) = %v %q, gjson %v %q", path, got.Type, got.Raw, want.Type, want.Raw)
		}
	}
}

// TestMembersGet: Get on Members of any JSON value is gjson's Get, repeated names and
// values that are not objects included.
func TestMembersGet(t *testing.T) {
	long := strings.Repeat("x", IndexBytes)
	for _, v := range []string{`{"a":1,"a":2,"b":{"c":[3]}}`, `[{"a":1},2]`, `"text"`, `12`, `null`, `{}`, ``,
		`{"a":1,"pad":"` + long + `","a":2,"b":{"c":[3]}}`, `[{"a":1},"` + long + `"]`} { // indexed, and too long to be
		o := Members(gjson.Parse(v))
		if o.indexed() != (len(v) >= IndexBytes && o.IsObject()) {
			t.Errorf("%.30s…: indexed %v", v, o.indexed())
		}
		for _, path := range []string{"a", "b", "b.c", "b.c.0", "0", "0.a", "1", "#", "x", ""} {
			got, want := o.Get(path), gjson.Get(v, path)
			if got.Type != want.Type || got.Raw != want.Raw {
				t.Errorf("%s: Get(%q) = %v %q, gjson %v %q", v, path, got.Type, got.Raw, want.Type, want.Raw)
			}
		}
	}
}

// TestExtrasIndexedOrNot: an object's extras are the same whether its members are indexed.
func TestExtrasIndexedOrNot(t *testing.T) {
	v := gjson.Parse(`{"role":"user","content":"c","n\u0061me":"x","tool_calls":[{"id":"1"}],"temperature":1,"z":null}`)
	small, whole := Members(v), index(v)
	if small.indexed() || !whole.indexed() {
		t.Fatalf("indexed: %v and %v", small.indexed(), whole.indexed())
	}
	got, want := Extras(small, "role", "content"), Extras(whole, "role", "content")
	if strings.Join(got, ",") != strings.Join(want, ",") || len(got) != 3 {
		t.Errorf("extras %q, indexed %q", got, want)
	}
}
