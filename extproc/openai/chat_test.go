package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/wire"
)

const msgs = `"messages":[{"role":"user","content":"hi"}]`

func TestParseChatRules(t *testing.T) {
	type want struct {
		code  apierr.Code
		param string
	}
	ok := want{}
	tests := []struct {
		name string
		body string
		want want
	}{
		{name: "minimal", body: `{"model":"m",` + msgs + `}`, want: ok},
		{name: "array root", body: `[{"model":"m",` + msgs + `}]`, want: want{apierr.InvalidRequest, ""}},
		{name: "string root", body: `"x"`, want: want{apierr.InvalidRequest, ""}},
		{name: "duplicate model", body: `{"model":"m","model":"n",` + msgs + `}`, want: want{apierr.InvalidRequest, "model"}},
		{name: "duplicate stream", body: `{"model":"m","stream":false,"stream":true,` + msgs + `}`, want: want{apierr.InvalidRequest, "stream"}},
		{name: "model 256", body: `{"model":"` + strings.Repeat("a", 256) + `",` + msgs + `}`, want: ok},
		{name: "model 257", body: `{"model":"` + strings.Repeat("a", 257) + `",` + msgs + `}`, want: want{apierr.InvalidModel, "model"}},
		{name: "model with em space", body: `{"model":"a\u2003b",` + msgs + `}`, want: want{apierr.InvalidModel, "model"}},
		{name: "model missing", body: `{` + msgs + `}`, want: want{apierr.InvalidModel, "model"}},
		{name: "messages missing", body: `{"model":"m"}`, want: want{apierr.InvalidRequest, "messages"}},
		{name: "messages object", body: `{"model":"m","messages":{}}`, want: want{apierr.InvalidRequest, "messages"}},
		{name: "messages empty", body: `{"model":"m","messages":[]}`, want: want{apierr.InvalidRequest, "messages"}},
		{name: "message not object", body: `{"model":"m","messages":["hi"]}`, want: want{apierr.InvalidRequest, "messages[0]"}},
		{name: "bad role", body: `{"model":"m","messages":[{"role":"bot","content":"x"}]}`, want: want{apierr.InvalidRequest, "messages[0].role"}},
		{name: "content missing", body: `{"model":"m","messages":[{"role":"user"},{"role":"user"}]}`, want: want{apierr.InvalidRequest, "messages[0].content"}},
		{name: "assistant tool_calls without content", body: `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}]}`, want: ok},
		{name: "assistant tool_calls content null", body: `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, want: ok},
		{name: "assistant function_call without content", body: `{"model":"m","messages":[{"role":"assistant","function_call":{"name":"f","arguments":"{}"}}]}`, want: ok},
		{name: "assistant without content or calls", body: `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant"}]}`, want: want{apierr.InvalidRequest, "messages[1].content"}},
		{name: "assistant empty tool_calls without content", body: `{"model":"m","messages":[{"role":"assistant","tool_calls":[]}]}`, want: want{apierr.InvalidRequest, "messages[0].content"}},
		{name: "assistant null tool_calls without content", body: `{"model":"m","messages":[{"role":"assistant","tool_calls":null,"function_call":null}]}`, want: want{apierr.InvalidRequest, "messages[0].content"}},
		{name: "user tool_calls without content", body: `{"model":"m","messages":[{"role":"user","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, want: want{apierr.InvalidRequest, "messages[0].content"}},
		{name: "function_call string", body: `{"model":"m","messages":[{"role":"assistant","function_call":"f"}]}`, want: want{apierr.InvalidRequest, "messages[0].function_call"}},
		{name: "tool_calls object without content", body: `{"model":"m","messages":[{"role":"assistant","tool_calls":{}}]}`, want: want{apierr.InvalidRequest, "messages[0].tool_calls"}},
		{name: "content null", body: `{"model":"m","messages":[{"role":"assistant","content":null}]}`, want: ok},
		{name: "content number", body: `{"model":"m","messages":[{"role":"user","content":1}]}`, want: want{apierr.InvalidRequest, "messages[0].content"}},
		{name: "part without type", body: `{"model":"m","messages":[{"role":"user","content":[{"text":"a"}]}]}`, want: want{apierr.InvalidRequest, "messages[0].content[0].type"}},
		{name: "part text number", body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":1}]}]}`, want: want{apierr.InvalidRequest, "messages[0].content[1].text"}},
		{name: "part image_url number", body: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":1}]}]}`, want: want{apierr.InvalidRequest, "messages[0].content[0].image_url"}},
		{name: "name number", body: `{"model":"m","messages":[{"role":"user","content":"x","name":1}]}`, want: want{apierr.InvalidRequest, "messages[0].name"}},
		{name: "tool_call_id number", body: `{"model":"m","messages":[{"role":"tool","content":"x","tool_call_id":1}]}`, want: want{apierr.InvalidRequest, "messages[0].tool_call_id"}},
		{name: "tool_calls object", body: `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":{}}]}`, want: want{apierr.InvalidRequest, "messages[0].tool_calls"}},
		{name: "max_tokens 1", body: `{"model":"m",` + msgs + `,"max_tokens":1}`, want: ok},
		{name: "max_tokens 0", body: `{"model":"m",` + msgs + `,"max_tokens":0}`, want: want{apierr.InvalidMaxTokens, "max_tokens"}},
		{name: "max_tokens 1.0", body: `{"model":"m",` + msgs + `,"max_tokens":1.0}`, want: want{apierr.InvalidMaxTokens, "max_tokens"}},
		{name: "max_tokens 1e3", body: `{"model":"m",` + msgs + `,"max_tokens":1e3}`, want: want{apierr.InvalidMaxTokens, "max_tokens"}},
		{name: "max_tokens -1", body: `{"model":"m",` + msgs + `,"max_tokens":-1}`, want: want{apierr.InvalidMaxTokens, "max_tokens"}},
		{name: "max_tokens huge", body: `{"model":"m",` + msgs + `,"max_tokens":1000000000000000000000}`, want: want{apierr.InvalidMaxTokens, "max_tokens"}},
		{name: "max_completion_tokens 0", body: `{"model":"m",` + msgs + `,"max_completion_tokens":0}`, want: want{apierr.InvalidMaxTokens, "max_completion_tokens"}},
		{name: "stream true", body: `{"model":"m",` + msgs + `,"stream":true}`, want: ok},
		{name: "stream string", body: `{"model":"m",` + msgs + `,"stream":"true"}`, want: want{apierr.InvalidStream, "stream"}},
		{name: "stream 1", body: `{"model":"m",` + msgs + `,"stream":1}`, want: want{apierr.InvalidStream, "stream"}},
		{name: "stream null", body: `{"model":"m",` + msgs + `,"stream":null}`, want: want{apierr.InvalidStream, "stream"}},
		{name: "n 1", body: `{"model":"m",` + msgs + `,"n":1}`, want: ok},
		{name: "n 1.0", body: `{"model":"m",` + msgs + `,"n":1.0}`, want: ok},
		{name: "n 2", body: `{"model":"m",` + msgs + `,"n":2}`, want: want{apierr.InvalidN, "n"}},
		{name: "temperature 0", body: `{"model":"m",` + msgs + `,"temperature":0}`, want: ok},
		{name: "temperature 2", body: `{"model":"m",` + msgs + `,"temperature":2}`, want: ok},
		{name: "temperature 2.0000001", body: `{"model":"m",` + msgs + `,"temperature":2.0000001}`, want: want{apierr.InvalidRequest, "temperature"}},
		{name: "top_p 1", body: `{"model":"m",` + msgs + `,"top_p":1}`, want: ok},
		{name: "top_p 1.01", body: `{"model":"m",` + msgs + `,"top_p":1.01}`, want: want{apierr.InvalidRequest, "top_p"}},
		{name: "stream_options array", body: `{"model":"m",` + msgs + `,"stream_options":[]}`, want: want{apierr.InvalidRequest, "stream_options"}},
		{name: "include_usage string", body: `{"model":"m",` + msgs + `,"stream_options":{"include_usage":"yes"}}`, want: want{apierr.InvalidRequest, "stream_options.include_usage"}},
		{name: "stop array of numbers", body: `{"model":"m",` + msgs + `,"stop":[1]}`, want: want{apierr.InvalidRequest, "stop"}},
		{name: "stop string", body: `{"model":"m",` + msgs + `,"stop":"x"}`, want: ok},
		{name: "tools with a string", body: `{"model":"m",` + msgs + `,"tools":["x"]}`, want: want{apierr.InvalidRequest, "tools"}},
		{name: "tool_choice number", body: `{"model":"m",` + msgs + `,"tool_choice":1}`, want: want{apierr.InvalidRequest, "tool_choice"}},
		{name: "response_format string", body: `{"model":"m",` + msgs + `,"response_format":"json"}`, want: want{apierr.InvalidRequest, "response_format"}},
		{name: "user number", body: `{"model":"m",` + msgs + `,"user":1}`, want: want{apierr.InvalidRequest, "user"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseChat([]byte(tt.body))
			switch {
			case tt.want.code == "" && err != nil:
				t.Fatalf("unexpected %v (param %q)", err, err.Param)
			case tt.want.code != "" && err == nil:
				t.Fatalf("accepted; want %s on %q", tt.want.code, tt.want.param)
			case err != nil && (err.Code != tt.want.code || err.Param != tt.want.param):
				t.Fatalf("got %s on %q, want %s on %q", err.Code, err.Param, tt.want.code, tt.want.param)
			}
		})
	}
}

func TestParseChatParsed(t *testing.T) {
	p, err := ParseChat([]byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}],"max_tokens":5,"max_completion_tokens":9,"stream":true,"stream_options":{"include_usage":true},"tools":[{"type":"function"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Model != "m" || !p.Stream || !p.IncludeUsage || p.MaxOutput != 9 || p.MaxOutputParam != "max_completion_tokens" ||
		p.Prompt.Messages != 2 || p.Prompt.Images != 1 || !p.Prompt.Tools || p.Prompt.JSON[len(p.Prompt.JSON)-1] != `"tools":[{"type":"function"}]` {
		t.Fatalf("parsed %+v", p)
	}
	p, err = ParseChat([]byte(`{"model":"m",` + msgs + `,"max_tokens":50,"max_completion_tokens":9}`))
	if err != nil || p.MaxOutput != 50 || p.MaxOutputParam != "max_tokens" {
		t.Fatalf("larger limit: %+v %v", p, err)
	}
}

// FuzzParsers checks every request parser of the package: none panics, and none accepts
// a body that encoding/json rejects.
func FuzzParsers(f *testing.F) {
	f.Add([]byte(`{"model":"m",` + msgs + `}`))
	f.Add([]byte(`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]}]}`))
	f.Add([]byte(`{"model":"m","input":[[1,2],[3]]}`))
	f.Add([]byte(`{"model":"m","input":"hi","voice":"v"}`))
	f.Add([]byte(`{"model":"m","prompt":"p","n":1.0}`))
	f.Add([]byte(`{"model":"m","model":"m"}`))
	parsers := []func([]byte) (wire.Parsed, *apierr.Error){
		ParseChat, ParseResponses, ParseEmbeddings, ParseMultimodalEmbeddings, ParseSpeech, ParseImages,
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		valid := json.Valid(body)
		for i, parse := range parsers {
			if _, err := parse(body); err == nil && !valid {
				t.Fatalf("parser %d accepted %q, which encoding/json rejects", i, body)
			}
		}
	})
}

// TestResponsesUnbillableFeatures checks that the Responses features whose cost the
// gateway could not bound or settle are refused, naming the field, and that their
// harmless spellings pass.
func TestResponsesUnbillableFeatures(t *testing.T) {
	for _, tc := range []struct {
		name, extra, param string
	}{
		{"background", `"background":true`, "background"},
		{"previous response", `"previous_response_id":"resp_123"`, "previous_response_id"},
		{"conversation", `"conversation":"conv_1"`, "conversation"},
		{"stored prompt", `"prompt":{"id":"pmpt_1"}`, "prompt"},
		{"background false", `"background":false`, ""},
		{"null fields", `"previous_response_id":null,"conversation":null,"prompt":null`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseResponses([]byte(`{"model":"m","input":"hi",` + tc.extra + `}`))
			switch {
			case tc.param == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.param != "" && (err == nil || err.Code != apierr.InvalidRequest || err.Param != tc.param):
				t.Errorf("err = %+v, want invalid_request on %s", err, tc.param)
			}
		})
	}
}
