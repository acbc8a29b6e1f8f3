package wire

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// The scanner is held to gjson, which it replaces for validation and walks, and to
// encoding/json: the same bodies valid, the same members and elements found.

var scanSamples = []string{
	`{}`, `[]`, `{"a":1}`, ` {"a" : [ 1 , 2 ] } `, `{"a":{"b":{"c":[{}]}},"d":"e"}`,
	`{"s":"a\"b\\c\/d\b\f\n\r\t\u00e9\uD83D\uDE00"}`, `{"\u006dodel":"x","m\"":1}`,
	`{"n":[0,-0,1.5,-2e10,3E+2,4e-3,123456789012345678901234567890]}`,
	`{"t":true,"f":false,"z":null}`, `"str"`, `12`, `null`, `[1,"2",{"3":[4]}]`,
	`{"long":"` + strings.Repeat("prose with words ", 40) + `"}`,
	`{"messages":[{"role":"user","content":"` + strings.Repeat(`a word\n \"q\" é `, 60) + `","name":"n"},` +
		`{"role":"assistant","content":[{"type":"text","text":"` + strings.Repeat("x", 600) + `"}]},{"role":"user"}]}`,
	// invalid
	``, ` `, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{"a":1 "b":2}`, `{a:1}`,
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":+1}`, `{"a":tru}`,
	`{"a":nul}`, `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, "{\"a\":\"\x01\"}",
	"{\"a\":\"tab\there\"}", `{"a":"unterminated}`, `{"a":1}}`, `{"a":1} x`, `[1] [2]`,
	`{"a":[1,2}`, `{"a":{"b":1]}`, `"\`, `"abc`, `{"a":"\`, `[`, `{"a":`, `{"a"`, `{"a":1,"b"`,
}

// randJSON writes a random JSON value of at most depth levels.
func randJSON(r *rand.Rand, sb *strings.Builder, depth int) {
	ws := func() {
		if r.IntN(4) == 0 {
			sb.WriteString([]string{" ", "\n", "\t", "\r\n  "}[r.IntN(4)])
		}
	}
	ws()
	switch k := r.IntN(10); {
	case depth > 0 && k < 3:
		sb.WriteByte('{')
		for i, n := 0, r.IntN(5); i < n; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			ws()
			randString(r, sb)
			ws()
			sb.WriteByte(':')
			randJSON(r, sb, depth-1)
		}
		ws()
		sb.WriteByte('}')
	case depth > 0 && k < 5:
		sb.WriteByte('[')
		for i, n := 0, r.IntN(5); i < n; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			randJSON(r, sb, depth-1)
		}
		ws()
		sb.WriteByte(']')
	case k < 7:
		randString(r, sb)
	case k < 8:
		sb.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	default:
		sb.WriteString([]string{"0", "-1", "12.5", "3e7", "-0.25E-3", "1234567"}[r.IntN(6)])
	}
	ws()
}

func randString(r *rand.Rand, sb *strings.Builder) {
	sb.WriteByte('"')
	for i, n := 0, r.IntN(40); i < n; i++ {
		switch k := r.IntN(20); {
		case k == 0:
			sb.WriteString([]string{`\"`, `\\`, `\n`, `\u00e9`, `\/`, `\t`}[r.IntN(6)])
		case k == 1:
			sb.WriteString("é😀")
		case k < 4:
			sb.WriteByte(' ')
		default:
			sb.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	sb.WriteByte('"')
}

// mutate damages s in one random place (which may leave it valid).
func mutate(r *rand.Rand, s string) string {
	if s == "" {
		return s
	}
	i := r.IntN(len(s))
	switch r.IntN(3) {
	case 0:
		return s[:i] + s[i+1:]
	case 1:
		const junk = `{}[]",:\ 0a-e.`
		return s[:i] + string(junk[r.IntN(len(junk))]) + s[i:]
	}
	return s[:i]
}

func corpus() []string {
	r := rand.New(rand.NewPCG(1, 2))
	out := append([]string(nil), scanSamples...)
	for range 3000 {
		var sb strings.Builder
		randJSON(r, &sb, 4)
		out = append(out, sb.String(), mutate(r, sb.String()))
	}
	return out
}

// checkScan holds Root, Members and ForEach on body to gjson and encoding/json.
func checkScan(t *testing.T, body string) {
	t.Helper()
	_, ok := scanBody([]byte(body), nil)
	if want := gjson.Valid(body); ok != want || ok != json.Valid([]byte(body)) {
		t.Fatalf("%q: valid %v, gjson %v, encoding/json %v", body, ok, want, json.Valid([]byte(body)))
	}
	if !ok {
		return
	}
	v := gjson.Parse(body)
	if v.IsObject() {
		want := gjsonIndex(v).members
		names := map[string]bool{}
		repeats := false
		for _, m := range want {
			repeats = repeats || names[m.name]
			names[m.name] = true
		}
		root, err := Root([]byte(body))
		if (err != nil) != repeats {
			t.Fatalf("%q: Root's error %v, a key repeated: %v", body, err, repeats)
		}
		if err == nil {
			sameMembers(t, body, root.members, want)
		}
	}
	// Every object and array inside, indexed and walked.
	var walk func(v gjson.Result)
	walk = func(v gjson.Result) {
		switch {
		case v.IsObject():
			sameMembers(t, v.Raw, index(v).members, gjsonIndex(v).members)
			v.ForEach(func(_, e gjson.Result) bool { walk(e); return true })
		case v.IsArray():
			var got []Object
			var want []gjson.Result
			ForEach(v, func(e Object) bool { got = append(got, e); return true })
			v.ForEach(func(_, e gjson.Result) bool { want = append(want, e); return true })
			if len(got) != len(want) {
				t.Fatalf("%q: %d elements, gjson %d", v.Raw, len(got), len(want))
			}
			for i := range got {
				sameValue(t, v.Raw, got[i].Result, want[i])
				// Indexed as Members indexes it, in the walk that found its end.
				if m := Members(want[i]); got[i].indexed() != m.indexed() {
					t.Fatalf("%q: element %d indexed %v, Members %v", v.Raw, i, got[i].indexed(), m.indexed())
				} else if m.indexed() {
					sameMembers(t, want[i].Raw, got[i].members, gjsonIndex(want[i]).members)
				}
				walk(want[i])
			}
		}
	}
	walk(v)
}

func sameMembers(t *testing.T, in string, got, want []member) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%q: %d members, gjson %d", in, len(got), len(want))
	}
	for i := range got {
		if got[i].name != want[i].name || got[i].key != want[i].key {
			t.Fatalf("%q: member %d is %q (%s), gjson %q (%s)", in, i, got[i].name, got[i].key, want[i].name, want[i].key)
		}
		sameValue(t, in, got[i].value, want[i].value)
	}
}

func sameValue(t *testing.T, in string, got, want gjson.Result) {
	t.Helper()
	if got.Type != want.Type || got.Raw != want.Raw || got.Str != want.Str || got.Num != want.Num {
		t.Fatalf("%q: value %#v, gjson %#v", in, got, want)
	}
}

func TestScanAgreesWithGjson(t *testing.T) {
	for _, body := range corpus() {
		checkScan(t, body)
	}
}

func FuzzScan(f *testing.F) {
	for _, s := range corpus()[:200] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) { checkScan(t, body) })
}

func TestStringEnd(t *testing.T) {
	// The reference: a byte at a time, an escaped byte skipped.
	ref := func(b []byte, i int) (int, bool) {
		esc := false
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				esc = true
				j++
			case '"':
				return j + 1, esc
			}
		}
		return -1, esc
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		b := make([]byte, 1+r.IntN(40))
		b[0] = '"'
		for j := 1; j < len(b); j++ {
			b[j] = `ab"\ x`[r.IntN(6)]
		}
		e1, x1 := StringEnd(b, 0)
		e2, x2 := ref(b, 0)
		if e1 != e2 || (e1 >= 0 && x1 != x2) {
			t.Fatalf("%q: StringEnd %d %v, reference %d %v", b, e1, x1, e2, x2)
		}
	}
}

// SetMember is held to sjson's SetRawBytes, which it replaces: the same bytes for every
// top-level member of every object of the corpus and for an absent one (but for the
// whitespace around the object, which sjson drops when it adds a member and SetMember
// keeps).
func TestSetMemberAgreesWithSjson(t *testing.T) {
	raws := []string{`true`, `"v"`, `{"include_usage":true}`, `[1,2]`}
	n := 0
	for _, body := range corpus() {
		v := gjson.Parse(body)
		if !gjson.Valid(body) || !v.IsObject() {
			continue
		}
		names := []string{"absent"}
		v.ForEach(func(k, _ gjson.Result) bool {
			if !strings.ContainsAny(k.Str, `.*?#@|\:!=<>%{}[]()"`+"`") && k.Str != "" {
				names = append(names, k.Str)
			}
			return true
		})
		for i, name := range names {
			raw := raws[(n+i)%len(raws)]
			got, ok := SetMember([]byte(body), name, []byte(raw))
			want, err := sjson.SetRawBytes([]byte(body), name, []byte(raw))
			if !ok || err != nil || strings.TrimSpace(string(got)) != strings.TrimSpace(string(want)) {
				t.Fatalf("%q: set %q to %s: %q (%v), sjson %q (%v)", body, name, raw, got, ok, want, err)
			}
			var old []byte
			seen := Set{name, func(o []byte) ([]byte, bool) { old = o; return []byte(raw), true }}
			if _, ok := SetMembers([]byte(body), seen); !ok || (old != nil) != (i > 0) ||
				old != nil && string(old) != v.Get(name).Raw {
				t.Fatalf("%q: member %q: %q %v", body, name, old, ok)
			}
		}
		n++
	}
	if n < 500 {
		t.Fatalf("only %d objects", n)
	}
	for _, notObject := range []string{`[1]`, `"s"`, `{"b":1`, `{"b":1,`, ``} {
		if _, ok := SetMember([]byte(notObject), "a", []byte("1")); ok {
			t.Fatalf("%q: set", notObject)
		}
	}
}

func TestSetModel(t *testing.T) {
	for _, model := range []string{"gpt-4o", `a"b\c<é>&` + "\x01", "claude-sonnet-4-5"} {
		set, err := SetModel(model)
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{`{"model":"demo","messages":[]}`, `{"messages":[],"model" : "demo" }`, `{"messages":[]}`} {
			got, ok := SetMembers([]byte(body), set)
			if !ok || gjson.GetBytes(got, "model").Str != model || !gjson.ValidBytes(got) ||
				gjson.GetBytes(got, "messages").Raw != "[]" {
				t.Fatalf("%s with %q: %s (%v)", body, model, got, ok)
			}
		}
	}
}

// Several sets in one walk: each applied once, at its first member or added in order.
func TestSetMembers(t *testing.T) {
	body := `{"a":1,"b":{"x":2},"a":3}`
	got, ok := SetMembers([]byte(body), To("c", []byte(`"new"`)), To("a", []byte("9")), To("d", []byte("[]")),
		Set{"b", func(old []byte) ([]byte, bool) { return SetMember(old, "y", []byte("true")) }})
	if want := `{"a":9,"b":{"x":2,"y":true},"a":3,"c":"new","d":[]}`; !ok || string(got) != want {
		t.Fatalf("got %s (%v), want %s", got, ok, want)
	}
	if out, ok := SetMembers([]byte(`{"a":1}`), Set{"a", func([]byte) ([]byte, bool) { return nil, false }}); ok ||
		string(out) != `{"a":1}` {
		t.Fatalf("a failed Value gave %s (%v)", out, ok)
	}
	if _, ok := SetMembers([]byte(`{"a":1}`), To("a", []byte("2")), To("a", []byte("3"))); ok {
		t.Fatal("two sets of one member were applied")
	}
	if got, ok := SetMembers([]byte(` {} `), To("k", []byte("1"))); !ok || string(got) != ` {"k":1} ` {
		t.Fatalf("empty object: %s (%v)", got, ok)
	}
}

// Bytes that do not scan (never from a body Root accepted) are left to gjson's walk, from
// the element where the scan stopped: the same elements and members as gjson's.
func TestScanFallsBackToGjson(t *testing.T) {
	for _, raw := range []string{
		`[1,"two",{"a":},4]`,
		`[{"a":1},{"b":[1,2},{"c":3}]`,
		`[1 2 3]`,
		`["unterminated]`,
		`[{"` + strings.Repeat("k", 600) + `":1,"x"}, 5]`,
	} {
		v := gjson.Parse(raw)
		var got, want []string
		ForEach(v, func(e Object) bool { got = append(got, e.Raw); return true })
		v.ForEach(func(_, e gjson.Result) bool { want = append(want, e.Raw); return true })
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: elements %q, gjson %q", raw, got, want)
		}
	}
	for _, raw := range []string{`{"a":1,"b":}`, `{"a" 1}`, `{"a":[1,2}`, `{"a":"x` + strings.Repeat(" ", 600)} {
		v := gjson.Parse(raw)
		o := index(v)
		if !o.indexed() {
			continue // gjson's answers then
		}
		var names []string
		o.Each(func(name, _ string, _ gjson.Result) bool { names = append(names, name); return true })
		var want []string
		v.ForEach(func(k, _ gjson.Result) bool { want = append(want, k.Str); return true })
		if strings.Join(names, "|") != strings.Join(want, "|") {
			t.Errorf("%s: members %q, gjson %q", raw, names, want)
		}
	}
}
