// Package wire holds what the request formats share: the field rules common to the
// OpenAI and Anthropic shapes (model id, stream flag, token limits, sampling ranges) and
// the neutral description of a validated request (Parsed, Prompt) that the request
// lifecycle consumes.
//
// A body is validated, and its objects and arrays walked, by the package's own scanner
// (scan.go); fields are read as gjson values of the client's bytes; nothing here
// re-marshals a body. It depends on apierr and gjson only.
package wire

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/tidwall/gjson"
)

// MaxBodyBytes is the spec's JSON request body limit (2 MiB), for every JSON endpoint,
// chunked bodies and count_tokens included.
const MaxBodyBytes = 2 << 20

// MaxModelIDLen is the longest model id, in characters.
const MaxModelIDLen = 256

// ValidModelID reports whether s is a model id: valid UTF-8, 1 to 256 characters, no
// Unicode whitespace.
func ValidModelID(s string) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxModelIDLen {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// Prompt is what the token counter needs from a request: every part a provider bills,
// by kind, each of which package tokens turns into an upper bound of billed tokens.
type Prompt struct {
	// Texts are message contents, text parts and the system prompt: counted as text.
	Texts []string
	// JSON are raw JSON parts a provider bills by a rendering of them: tool and function
	// definitions, response_format / text.format schemas, tool calls, and every
	// top-level field the format's parser does not walk itself (see Extras).
	JSON []string
	// Messages is how many messages frame the texts.
	Messages int
	// Images counts image parts, whatever their source (URL, bytes, file id).
	Images int
	// AudioBytes is the decoded size of inline audio parts.
	AudioBytes int64
	// Documents are the files and documents sent by their bytes (PDFs), bounded by
	// their pages (see Document).
	Documents []Document
	// Tools: the request offers tools, for which providers add a tool-use system prompt.
	Tools bool
	// Output are raw JSON parts billed as output tokens (chat prediction).
	Output []string
	// Unbounded names the first part whose size cannot be known before the provider
	// fetches it (a document by URL or file id, an earlier answer's audio): its cost
	// cannot be bounded, and the request is refused as pricing_unavailable at the
	// pricing step.
	Unbounded string
}

// Document is a file or document part sent by its bytes. The parsers record where it
// is and its base64 text; its pages are counted from the bytes only once the request's
// key is known (admission, step 9), never for an anonymous caller.
type Document struct {
	// Param is the document's data field in the client's request
	// ("messages[0].content[1].file.file_data", "messages[0].content[1].source.data").
	Param string
	// Data is the field's text: base64, or a data URL with a base64 payload.
	Data string
	// Pages is the document's page count once counted; 0 before.
	Pages int
}

// Unbound records the part at param as one that cannot be bounded (see Unbounded),
// unless an earlier part already was.
func (p *Prompt) Unbound(param string) {
	if p.Unbounded == "" {
		p.Unbounded = param
	}
}

// Parsed is a validated request in neutral form.
type Parsed struct {
	Model  string
	Stream bool
	// MaxOutput is the request's output-token limit; 0 when the request gave none.
	MaxOutput int64
	// MaxOutputParam names the field MaxOutput came from ("max_tokens", ...).
	MaxOutputParam string
	// IncludeUsage: the client itself asked for stream_options.include_usage: true.
	IncludeUsage bool
	Prompt       Prompt
	// KnownTokens are input tokens the request gives as token ids (embeddings token
	// arrays): counted by their number, added to the prompt's counted text.
	KnownTokens int64
	// Units is the billed quantity of a per-unit endpoint: input characters (speech,
	// Unicode code points) or images. Video seconds are in Video.Duration.
	Units int64
	// Voice is the speech voice, checked against the model's voices by the caller.
	Voice string
	// Video holds a video submission's fields; nil on other endpoints.
	Video *Video
	// Unpriced names the request field that asks the upstream for work the catalog
	// publishes no price for (server-side tools: web search, code execution, …): the
	// provider would bill it beyond tokens, so the request is refused as
	// pricing_unavailable at the pricing step. Empty when there is none.
	Unpriced string
	// RateCard is what a chat request asks of the model's rate card.
	RateCard RateCard
}

// ServerTools returns "tools" when the tools array holds a tool whose type the caller's
// clientTool does not accept — a tool the provider runs and bills itself — else "". A
// tool without a type is a client tool.
func ServerTools(root Object, clientTool func(typ string) bool) string {
	found := ""
	root.Get("tools").ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type"); typ.Exists() && typ.Type == gjson.String && !clientTool(typ.Str) {
			found = "tools"
			return false
		}
		return true
	})
	return found
}

// Video is what a video submission asks for, before the model's own rules (duration
// range, default, resolution tier) are applied.
type Video struct {
	// Duration in whole seconds; 0 when omitted (the model's default applies).
	Duration int64
	// Resolution is the explicit "resolution" field; empty when omitted.
	Resolution string
	// Prompt is the prompt text, where a resolution tier may also be named.
	Prompt string
	// WebhookURL is the syntactically checked webhook; its host is resolved later.
	WebhookURL string
}

// Object is a request body's top-level JSON object with its members read once (by
// Root): Get finds a top-level field without walking the body again. gjson's own Get
// walks the object from its start for every name, past every member before it, and for
// an absent name (most optional fields) past all of them, the conversation's long
// strings included: a 33 KB chat request took ≈0.45 ms to parse, most of it those walks.
type Object struct {
	gjson.Result
	members []member // nil: not indexed (Get is gjson's)
}

// indexed reports whether o's members are indexed.
func (o Object) indexed() bool { return o.members != nil }

type member struct {
	name, key string // key: the name as the body writes it, quoted
	value     gjson.Result
}

// Get is what o.Result.Get(path) is, the members found by name: a top-level field's
// name, or a name, a dot and a path inside that field. Other gjson path syntax (wildcards,
// queries, escapes, modifiers) goes to gjson.
func (o Object) Get(path string) gjson.Result {
	name, rest, nested := strings.Cut(path, ".")
	if !o.indexed() || strings.ContainsAny(name, `*?|#@\!=<>%`) {
		return o.Result.Get(path)
	}
	for i := range o.members {
		if o.members[i].name == name {
			if nested {
				return o.members[i].value.Get(rest)
			}
			return o.members[i].value
		}
	}
	return gjson.Result{}
}

// Each calls fn with each member of o in order (its name, its key as the body writes
// it, quoted, and its value) until fn returns false: from the index when o is indexed,
// else by gjson's walk.
func (o Object) Each(fn func(name, key string, v gjson.Result) bool) {
	if o.indexed() {
		for _, m := range o.members {
			if !fn(m.name, m.key, m.value) {
				return
			}
		}
		return
	}
	o.ForEach(func(k, v gjson.Result) bool { return fn(k.Str, k.Raw, v) })
}

// IndexBytes is the size from which Members indexes an object: below it, gjson's walks of
// the object cost less than the index's allocation.
const IndexBytes = 512

// Members is v for field lookups: indexed when it is a JSON object of IndexBytes or more,
// else answered by gjson's Get. When a name repeats, Get finds the first, as gjson does.
func Members(v gjson.Result) Object {
	if len(v.Raw) < IndexBytes {
		return Object{Result: v}
	}
	return index(v)
}

// index is v with its members indexed when it is a JSON object (of a body Root
// accepted: each member's value is found by skipping, not parsing, the ones before it;
// should its bytes not scan, gjson's walk indexes it).
func index(v gjson.Result) Object {
	o := Object{Result: v}
	if !v.IsObject() {
		return o
	}
	ms, _, ok := objectAt(v.Raw, readOnlyBytes(v.Raw), 0, v.Index, make([]member, 0, 8))
	if !ok {
		return gjsonIndex(v)
	}
	o.members = ms
	return o
}

// objectAt appends the members of the object at b[i] (b is raw's bytes, raw a JSON text
// at offset base of its body) to ms, and returns the offset past its closing brace; ok
// is false when its bytes do not scan.
func objectAt(raw string, b []byte, i, base int, ms []member) (_ []member, end int, ok bool) {
	end, ok = walkMembers(b, i, func(k span) bool {
		ms = append(ms, k.member(raw, base))
		return true
	})
	return ms, end, ok
}

// walkMembers calls fn with the place of each member of the object whose '{' is at b[i]
// (valid JSON: each value is skipped, not parsed), in order, until fn returns false. end
// is the offset past the closing brace, or 0 when fn stopped the walk; ok is false when
// the bytes walked do not scan.
func walkMembers(b []byte, i int, fn func(k span) bool) (end int, ok bool) {
	for i = skipSpace(b, i+1); i < len(b) && b[i] != '}'; {
		k, ok := memberAt(b, i)
		if !ok {
			return 0, false
		}
		if !fn(k) {
			return 0, true
		}
		i = skipSpace(b, k.ve)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
	if i >= len(b) {
		return 0, false
	}
	return i + 1, true
}

// memberAt reads the member at b[i] of valid JSON (key, colon, value) and returns its
// place.
func memberAt(b []byte, i int) (span, bool) {
	if i >= len(b) || b[i] != '"' {
		return span{}, false
	}
	ke, kEsc := StringEnd(b, i)
	if ke < 0 {
		return span{}, false
	}
	vs := skipSpace(b, ke)
	if vs >= len(b) || b[vs] != ':' {
		return span{}, false
	}
	vs = skipSpace(b, vs+1)
	ve, vEsc := valueEnd(b, vs)
	if ve < 0 {
		return span{}, false
	}
	return span{ks: i, ke: ke, vs: vs, ve: ve, kEsc: kEsc, vEsc: vEsc}, true
}

// member is the member at k in raw (a JSON text at offset index of its body).
func (k span) member(raw string, index int) member {
	return member{name: k.name(raw), key: raw[k.ks:k.ke], value: result(raw[k.vs:k.ve], k.vEsc, index+k.vs)}
}

// name is the name of the member at k in raw: its key unquoted, escapes decoded.
func (k span) name(raw string) string {
	if k.kEsc {
		return gjson.Parse(raw[k.ks:k.ke]).Str
	}
	return raw[k.ks+1 : k.ke-1]
}

// gjsonIndex is index by gjson's walk.
func gjsonIndex(v gjson.Result) Object {
	o := Object{Result: v, members: make([]member, 0, 8)}
	v.ForEach(func(k, v gjson.Result) bool {
		o.members = append(o.members, member{k.Str, k.Raw, v})
		return true
	})
	return o
}

// Root parses body as a JSON object, or returns invalid_request. It validates the body
// and indexes its members in one pass (scanBody).
func Root(body []byte) (Object, *apierr.Error) {
	if len(body) == 0 {
		return Object{}, apierr.New(apierr.InvalidRequest, "The request body is empty; a JSON object is required.")
	}
	spans, ok := scanBody(body, make([]span, 0, 8))
	if !ok {
		return Object{}, apierr.New(apierr.InvalidRequest, "The request body is not valid JSON.")
	}
	s := string(body)
	v := gjson.Parse(s)
	if !v.IsObject() {
		return Object{}, apierr.New(apierr.InvalidRequest, "The request body must be a JSON object.")
	}
	root := Object{Result: v, members: make([]member, len(spans))}
	for i, k := range spans {
		root.members[i] = k.member(s, 0)
	}
	// A repeated top-level key is refused: JSON parsers disagree on which copy wins, so a
	// body with two "model" fields could be billed as one model and served as another.
	if len(root.members) <= 32 {
		for i, m := range root.members {
			for _, earlier := range root.members[:i] {
				if earlier.name == m.name {
					return Object{}, repeated(m.name)
				}
			}
		}
		return root, nil
	}
	seen := make(map[string]struct{}, len(root.members))
	for _, m := range root.members {
		if _, ok := seen[m.name]; ok {
			return Object{}, repeated(m.name)
		}
		seen[m.name] = struct{}{}
	}
	return root, nil
}

func repeated(name string) *apierr.Error {
	return apierr.Param(apierr.InvalidRequest, name, "The field '"+name+"' appears more than once.")
}

// Model reads and checks the required "model" field.
func Model(root Object) (string, *apierr.Error) {
	m := root.Get("model")
	if !m.Exists() {
		return "", apierr.Param(apierr.InvalidModel, "model", "The 'model' field is required.")
	}
	if m.Type != gjson.String || !ValidModelID(m.Str) {
		return "", apierr.Param(apierr.InvalidModel, "model",
			"The 'model' field must be a string of 1 to 256 characters without whitespace.")
	}
	return m.Str, nil
}

// Stream reads the optional "stream" field of an endpoint that can stream: absent is
// false; anything but the JSON boolean true or false is invalid_stream, null included
// (the spec's rule: "must be a JSON boolean").
func Stream(root Object) (bool, *apierr.Error) {
	s := root.Get("stream")
	switch {
	case !s.Exists():
		return false, nil
	case s.Type == gjson.True:
		return true, nil
	case s.Type == gjson.False:
		return false, nil
	}
	return false, apierr.Param(apierr.InvalidStream, "stream", "The 'stream' field must be the JSON boolean true or false.")
}

// PositiveInt reads an optional output-token limit named param. It must be a JSON number
// written as an integer (digits only: no fraction, no exponent, so 1.0 and 1e3 are
// refused) with a value in 1..2^53; null counts as absent. required makes absence an
// error too. It returns 0 when absent.
func PositiveInt(root Object, param string, required bool) (int64, *apierr.Error) {
	v := root.Get(param)
	if !v.Exists() || (v.Type == gjson.Null && !required) {
		if required {
			return 0, apierr.Param(apierr.InvalidMaxTokens, param, "The '"+param+"' field is required.")
		}
		return 0, nil
	}
	if v.Type != gjson.Number || !isIntegerLiteral(v.Raw) {
		return 0, apierr.Param(apierr.InvalidMaxTokens, param, "The '"+param+"' field must be a positive integer.")
	}
	n, err := strconv.ParseInt(v.Raw, 10, 64)
	if err != nil || n <= 0 || n > 1<<53 {
		return 0, apierr.Param(apierr.InvalidMaxTokens, param, "The '"+param+"' field must be a positive integer.")
	}
	return n, nil
}

func isIntegerLiteral(raw string) bool {
	if raw == "" {
		return false
	}
	if raw[0] == '-' {
		raw = raw[1:]
	}
	if raw == "" {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < '0' || raw[i] > '9' {
			return false
		}
	}
	return true
}

// Range checks an optional number field named param against [lo, hi]; null counts as
// absent. A non-number or an out-of-range value is invalid_request naming the field.
func Range(root Object, param string, lo, hi float64) *apierr.Error {
	v := root.Get(param)
	if !v.Exists() || v.Type == gjson.Null {
		return nil
	}
	if v.Type != gjson.Number || v.Num < lo || v.Num > hi {
		return apierr.Param(apierr.InvalidRequest, param,
			"The '"+param+"' field must be a number from "+fmtNum(lo)+" to "+fmtNum(hi)+".")
	}
	return nil
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// IsString reports whether v is a JSON string.
func IsString(v gjson.Result) bool { return v.Type == gjson.String }

// IsIntegerLiteral reports whether raw (a JSON number's text) is written as an integer:
// an optional minus sign and digits only, no fraction or exponent.
func IsIntegerLiteral(raw string) bool { return isIntegerLiteral(raw) }

// NoStream reads an optional "stream" field on an endpoint that cannot stream (the spec
// gives these endpoints no such field): absent, null and false pass, another non-boolean
// is invalid_stream, true is invalid_request naming what cannot stream.
func NoStream(root Object, what string) *apierr.Error {
	if root.Get("stream").Type == gjson.Null {
		return nil
	}
	s, err := Stream(root)
	if err != nil {
		return err
	}
	if s {
		return apierr.Param(apierr.InvalidRequest, "stream", what+" cannot be streamed; omit 'stream' or set it to false.")
	}
	return nil
}

// RateCard is what a chat request asks of a model's rate card beyond plain tokens: the
// tier and region it names, and the priced parts its answer can hold that a plain
// request's cannot.
type RateCard struct {
	// ServiceTier is the request's service_tier ("" when absent); InferenceGeo its
	// inference_geo.
	ServiceTier  string
	InferenceGeo string
	// CacheMarkers: a cache_control marker appears somewhere in the body, so the
	// provider may write the prompt to a 1-hour cache.
	CacheMarkers bool
	// AudioOutput: the request asks for audio output (modalities or audio).
	AudioOutput bool
}

// ReadRateCard reads the rate-card fields of a chat request (service_tier and
// inference_geo must be strings when present).
func ReadRateCard(root Object, body []byte) (RateCard, *apierr.Error) {
	var rc RateCard
	var err *apierr.Error
	if rc.ServiceTier, err = OptionalString(root, "service_tier"); err != nil {
		return rc, err
	}
	if rc.InferenceGeo, err = OptionalString(root, "inference_geo"); err != nil {
		return rc, err
	}
	rc.CacheMarkers = hasKey(body, "cache_control")
	if a := root.Get("audio"); a.Exists() && a.Type != gjson.Null {
		rc.AudioOutput = true
	}
	root.Get("modalities").ForEach(func(_, m gjson.Result) bool {
		rc.AudioOutput = rc.AudioOutput || m.Str == "audio"
		return true
	})
	return rc, nil
}

// hasKey reports whether an object member named key appears at any depth of the JSON
// body. A body that names it neither plainly nor with an escape is not walked.
func hasKey(body []byte, key string) bool {
	if !bytes.Contains(body, []byte(key)) && !bytes.Contains(body, []byte(`\u`)) {
		return false
	}
	var walk func(v gjson.Result) bool
	walk = func(v gjson.Result) bool {
		found := false
		v.ForEach(func(k, e gjson.Result) bool {
			found = k.Type == gjson.String && k.Str == key || (e.IsObject() || e.IsArray()) && walk(e)
			return !found
		})
		return found
	}
	return walk(gjson.ParseBytes(body))
}
