package front

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/types/known/structpb"
)

// The access log's json_format is compiled once, when the configuration is read, into
// the fields below; a line is then appended to a reused buffer. The bytes are those
// json.Marshal gives for the format with every operator replaced by its value (keys in
// sorted order, HTML characters escaped, a value JSON cannot hold emptying the line).

// logField is one key of the json_format and how its value is rendered.
type logField struct {
	// key is the key as JSON, followed by a colon.
	key []byte
	// object holds the keys of a nested object (isObject).
	object   []logField
	isObject bool
	// text is a plain string value, as JSON (op == "").
	text []byte
	// op and arg are the command operator; REQ's arg is lowercased.
	op, arg string
	// path is DYNAMIC_METADATA's namespace and keys.
	path []string
}

// compileLogFormat compiles a format checkLogFormat accepted.
func compileLogFormat(format map[string]any) []logField {
	fields := []logField{}
	for _, k := range slices.Sorted(maps.Keys(format)) {
		key, _ := json.Marshal(k)
		f := logField{key: append(key, ':')}
		switch v := format[k].(type) {
		case map[string]any:
			f.object, f.isObject = compileLogFormat(v), true
		case string:
			m := logOperator.FindStringSubmatch(v)
			if m == nil {
				f.text, _ = json.Marshal(v)
				break
			}
			f.op, f.arg = m[1], m[2]
			switch f.op {
			case "REQ":
				f.arg = strings.ToLower(f.arg)
			case "DYNAMIC_METADATA":
				f.path = strings.Split(f.arg, ":")
			}
		}
		fields = append(fields, f)
	}
	return fields
}

// appendLine appends the record's line, newline included.
func (l *AccessLog) appendLine(b []byte, r *logRecord) []byte {
	start := len(b)
	b, ok := r.appendObject(b, l.fields)
	if !ok {
		b = b[:start]
	}
	return append(b, '\n')
}

func (r *logRecord) appendObject(b []byte, fields []logField) ([]byte, bool) {
	b = append(b, '{')
	for i := range fields {
		f := &fields[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, f.key...)
		var ok bool
		if b, ok = r.appendValue(b, f); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func (r *logRecord) appendValue(b []byte, f *logField) ([]byte, bool) {
	switch {
	case f.isObject:
		return r.appendObject(b, f.object)
	case f.op == "":
		return append(b, f.text...), true
	}
	switch f.op {
	case "START_TIME":
		// Envoy's default START_TIME format (AccessLogDateTimeFormatter, UTC, milliseconds).
		b = append(b, '"')
		b = r.start.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
		return append(b, '"'), true
	case "RESPONSE_CODE":
		return strconv.AppendInt(b, int64(r.status), 10), true
	case "DURATION":
		return strconv.AppendInt(b, r.end.Sub(r.start).Milliseconds(), 10), true
	case "REQ":
		if v, ok := r.req.get(f.arg); ok {
			return appendJSONString(b, v), true
		}
	case "DYNAMIC_METADATA":
		return r.appendMetadata(b, f.path)
	}
	return append(b, "null"...), true
}

// appendMetadata renders the dynamic metadata at path: null when a namespace or key is
// missing or a key's parent is not an object.
func (r *logRecord) appendMetadata(b []byte, path []string) ([]byte, bool) {
	s := r.meta[path[0]]
	if s == nil {
		return append(b, "null"...), true
	}
	if len(path) == 1 {
		return appendMarshal(b, s.AsMap())
	}
	v := s.GetFields()[path[1]]
	for _, k := range path[2:] {
		sv, ok := v.GetKind().(*structpb.Value_StructValue)
		if !ok || sv == nil {
			return append(b, "null"...), true
		}
		v = sv.StructValue.GetFields()[k]
	}
	// AsInterface is the value as the Struct's AsMap has it (NaN and infinities as
	// strings, for one).
	switch x := v.AsInterface().(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendJSONString(b, x), true
	case float64:
		return appendJSONNumber(b, x)
	case bool:
		return strconv.AppendBool(b, x), true
	default:
		return appendMarshal(b, x)
	}
}

// appendJSONString appends s as json.Marshal encodes it: printable ASCII without
// quotes, backslashes or HTML characters is copied; anything else is left to
// encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			out, _ := json.Marshal(s)
			return append(b, out...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONNumber appends f as json.Marshal encodes a float64: without an exponent
// when 1e-6 <= |f| < 1e21 (or f is zero); other values are left to encoding/json.
func appendJSONNumber(b []byte, f float64) ([]byte, bool) {
	if abs := math.Abs(f); abs == 0 || abs >= 1e-6 && abs < 1e21 {
		return strconv.AppendFloat(b, f, 'f', -1, 64), true
	}
	return appendMarshal(b, f)
}

func appendMarshal(b []byte, v any) ([]byte, bool) {
	out, err := json.Marshal(v)
	if err != nil {
		return b, false
	}
	return append(b, out...), true
}

// lineBuffers are reused access log line buffers.
var lineBuffers = sync.Pool{New: func() any { return new([]byte) }}
