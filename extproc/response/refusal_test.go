package response

import "testing"

// TestRefusedField: each provider's refusal of an unknown field, in its own words, and
// OpenAI's param for a known one.
func TestRefusedField(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       Refusal
	}{
		{"openai unknown", `{"error":{"message":"Unrecognized request argument supplied: foo","type":"invalid_request_error","param":null,"code":null}}`,
			Refusal{Type: "invalid_request_error", Field: "foo", Unknown: true}},
		{"openai several unknown", `{"error":{"message":"Unrecognized request argument supplied: bar, foo","type":"invalid_request_error","param":null,"code":null}}`,
			Refusal{Type: "invalid_request_error", Field: "bar", Unknown: true}},
		{"openai param", `{"error":{"message":"Invalid type for 'temperature': expected a decimal.","type":"invalid_request_error","param":"temperature","code":"invalid_type"}}`,
			Refusal{Type: "invalid_request_error", Field: "temperature"}},
		{"anthropic unknown", `{"type":"error","error":{"type":"invalid_request_error","message":"foo: Extra inputs are not permitted"}}`,
			Refusal{Type: "invalid_request_error", Field: "foo", Unknown: true}},
		{"google unknown", `{"error":{"code":400,"message":"Invalid JSON payload received. Unknown name \"foo\": Cannot find field.","status":"INVALID_ARGUMENT"}}`,
			Refusal{Type: "INVALID_ARGUMENT", Field: "foo", Unknown: true}},
		{"google field violation", `{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"generation_config.foo","description":"Cannot find field."}]}]}}`,
			Refusal{Type: "INVALID_ARGUMENT", Field: "generation_config.foo"}},
		{"bedrock unknown", `{"message":"Malformed input request: extraneous key [foo] is not permitted, please reformat your input and try again."}`,
			Refusal{Field: "foo", Unknown: true}},
		{"no field", `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			Refusal{Type: "invalid_request_error", Field: "messages"}},
		{"a name that is not a field", `{"type":"error","error":{"type":"invalid_request_error","message":"model \"claude-x\" is not found: Extra inputs are not permitted"}}`,
			Refusal{Type: "invalid_request_error"}},
		{"not json", `<html>bad gateway</html>`, Refusal{}},
	} {
		if got := RefusedField([]byte(tt.body)); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
