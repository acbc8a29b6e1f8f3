package front

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
)

// marshalLine is the access log line as json.Marshal renders the format with every
// operator replaced by its value: what the compiled format must reproduce byte for byte.
func marshalLine(format map[string]any, r *logRecord) []byte {
	var render func(v any) any
	render = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				out[k] = render(e)
			}
			return out
		case string:
			m := logOperator.FindStringSubmatch(x)
			if m == nil {
				return x
			}
			switch m[1] {
			case "START_TIME":
				return r.start.UTC().Format("2006-01-02T15:04:05.000Z")
			case "RESPONSE_CODE":
				return r.status
			case "DURATION":
				return r.end.Sub(r.start).Milliseconds()
			case "REQ":
				if v, ok := r.req.get(strings.ToLower(m[2])); ok {
					return v
				}
				return nil
			case "DYNAMIC_METADATA":
				path := strings.Split(m[2], ":")
				s := r.meta[path[0]]
				if s == nil {
					return nil
				}
				var v any = s.AsMap()
				for _, k := range path[1:] {
					mm, ok := v.(map[string]any)
					if !ok {
						return nil
					}
					v = mm[k]
				}
				return v
			}
		}
		return v
	}
	b, _ := json.Marshal(render(format))
	return append(b, '\n')
}

func TestAccessLineAsMarshalled(t *testing.T) {
	format := map[string]any{
		"start_time": "%START_TIME%", "status": "%RESPONSE_CODE%", "duration_ms": "%DURATION%",
		"request_id": "%REQ(X-REQUEST-ID)%", "agent": "%REQ(user-agent)%", "absent": "%REQ(x-none)%",
		"plain": "a <b> & \"c\" é", "whole": "%DYNAMIC_METADATA(llmgw)%", "other": "%DYNAMIC_METADATA(other:k)%",
		"nested": map[string]any{"z": "%DYNAMIC_METADATA(llmgw:deep:inner)%", "a": "%DYNAMIC_METADATA(llmgw:deep:none:x)%", "empty": map[string]any{}},
		"Upper":  "x", "_under": "y", "é": "%DYNAMIC_METADATA(llmgw:s)%",
	}
	for k := range map[string]bool{"s": true, "n": true, "b": true, "null": true, "list": true, "deep": true, "missing": true, "unset": true} {
		format["m_"+k] = "%DYNAMIC_METADATA(llmgw:" + k + ")%"
	}
	if err := checkLogFormat(format); err != nil {
		t.Fatal(err)
	}
	al := &AccessLog{fields: compileLogFormat(format)}
	start := time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.FixedZone("x", 3600))
	values := []*structpb.Value{
		structpb.NewStringValue("plain"), structpb.NewStringValue("<html> & \"quotes\" \\ \n\t\u2028 é \xff"),
		structpb.NewStringValue(""), structpb.NewNumberValue(0), structpb.NewNumberValue(math.Copysign(0, -1)),
		structpb.NewNumberValue(4096), structpb.NewNumberValue(-12.5), structpb.NewNumberValue(1e21),
		structpb.NewNumberValue(123456789012345678), structpb.NewNumberValue(1e-7), structpb.NewNumberValue(0.000001),
		structpb.NewNumberValue(math.NaN()), structpb.NewNumberValue(math.Inf(-1)),
		structpb.NewBoolValue(true), structpb.NewNullValue(), {},
		structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(1), structpb.NewStringValue("<")}}),
		structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"inner": structpb.NewNumberValue(2.5), "b": structpb.NewStringValue("&")}}),
		structpb.NewStructValue(nil), {Kind: (*structpb.Value_StringValue)(nil)}, {Kind: (*structpb.Value_StructValue)(nil)},
	}
	for i, v := range values {
		fields := map[string]*structpb.Value{"s": v, "n": values[(i+3)%len(values)], "b": values[(i+5)%len(values)],
			"null": structpb.NewNullValue(), "list": values[(i+7)%len(values)], "deep": values[(i+11)%len(values)], "unset": {}}
		recs := []*logRecord{
			{start: start, end: start.Add(1234567 * time.Microsecond), status: 200,
				req:  headerList{{"x-request-id", "id-" + string(rune('a'+i))}, {"user-agent", "ua <" + string(rune(0x80+i)) + ">"}},
				meta: map[string]*structpb.Struct{"llmgw": {Fields: fields}, "other": {Fields: map[string]*structpb.Value{"k": v}}}},
			{start: start, end: start, status: 0, meta: map[string]*structpb.Struct{"llmgw": {}}},
			{start: start, end: start.Add(-time.Second)},
		}
		for j, r := range recs {
			want := marshalLine(format, r)
			if got := al.appendLine([]byte("kept"), r); string(got) != "kept"+string(want) {
				t.Errorf("value %d, record %d:\n got %s\nwant %s", i, j, got[4:], want)
			}
		}
	}
}
