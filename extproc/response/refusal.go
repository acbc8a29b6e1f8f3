package response

import (
	"regexp"

	"github.com/tidwall/gjson"
)

// Refusal is what a provider's refusal of a request as invalid says of the field at
// fault, read from its error body (never its message text, which may name the upstream
// model).
type Refusal struct {
	// Type is the provider's error type or status (invalid_request_error,
	// INVALID_ARGUMENT, ValidationException when the body says it), "" when none.
	Type string
	// Field is the request field the provider named, "" when it named none; Unknown
	// says the provider does not know the field at all (a misspelt name).
	Field   string
	Unknown bool
}

// The providers' words for a field they do not know, each with the field's name as its
// first group:
//   - OpenAI: "Unrecognized request argument supplied: foo" (param null; several names
//     are listed with ", ");
//   - Anthropic: "foo: Extra inputs are not permitted";
//   - Google (Gemini API, Vertex AI): `Invalid JSON payload received. Unknown name "foo":
//     Cannot find field.`, also as a BadRequest detail's fieldViolations[].field;
//   - Bedrock: "Malformed input request: extraneous key [foo] is not permitted".
var unknownField = []*regexp.Regexp{
	regexp.MustCompile(`^Unrecognized request argument supplied: ([^,\s]+)`),
	regexp.MustCompile(`^([^:\s]+): Extra inputs are not permitted`),
	regexp.MustCompile(`Unknown name "([^"]+)"`),
	regexp.MustCompile(`extraneous key \[([^\]]+)\] is not permitted`),
}

// fieldName is what a field the gateway repeats to the client may look like: a JSON
// member name or a dotted path into one, short, without spaces or quotes.
var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.\[\]-]{0,99}$`)

// RefusedField reads a provider's error body for the field it refused (Refusal): an
// unknown field in any provider's words, else OpenAI's param. A name that does not look
// like a field is not returned.
func RefusedField(body []byte) Refusal {
	if !gjson.ValidBytes(body) {
		return Refusal{}
	}
	root := gjson.ParseBytes(body)
	e := root.Get("error")
	var out Refusal
	msg := e.Get("message").Str
	switch {
	case e.IsObject():
		out.Type = e.Get("type").Str
		if out.Type == "" {
			out.Type = e.Get("status").Str
		}
	default:
		// Bedrock: {"message"}, its type in the x-amzn-ErrorType header.
		msg = root.Get("message").Str
	}
	for _, re := range unknownField {
		if m := re.FindStringSubmatch(msg); m != nil && fieldName.MatchString(m[1]) {
			out.Field, out.Unknown = m[1], true
			return out
		}
	}
	e.Get("details.#.fieldViolations.#.field").ForEach(func(_, v gjson.Result) bool {
		v.ForEach(func(_, f gjson.Result) bool {
			if fieldName.MatchString(f.Str) {
				out.Field = f.Str
			}
			return out.Field == ""
		})
		return out.Field == ""
	})
	if out.Field != "" {
		return out
	}
	if p := e.Get("param"); p.Type == gjson.String && fieldName.MatchString(p.Str) {
		out.Field = p.Str
	}
	return out
}
