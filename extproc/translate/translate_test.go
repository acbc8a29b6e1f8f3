package translate

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/sse"
	"github.com/tidwall/gjson"
)

var apis = []API{Chat, Messages, Responses}

// recorded reads testdata/<dir>/<api>.<ext>.
func recorded(t *testing.T, dir string, api API, ext string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + dir + "/" + api.String() + "." + ext)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// collect decodes a client stream with the client API's own decoder (the reverse
// direction, tested on its own shapes by the recorded streams) into a neutral answer.
func collect(t *testing.T, api API, stream []byte) (*Response, bool) {
	t.Helper()
	dec := codecs[api].newStreamDecoder()
	r := &Response{}
	done := false
	parts := map[int]*Part{}
	var order []int
	err := sse.NewDecoder(0).Feed(stream, func(ev *sse.Event) error {
		if ev.DataLines == 0 {
			return nil
		}
		return dec.decode(ev, func(e Event) {
			switch e.Kind {
			case EventText:
				p, ok := parts[e.Index]
				if !ok {
					p = &Part{Kind: PartText}
					parts[e.Index] = p
					order = append(order, e.Index)
				}
				p.Text += e.Text
			case EventToolCall:
				c := e.ToolCall
				parts[e.Index] = &Part{Kind: PartToolCall, ToolCall: &c}
				order = append(order, e.Index)
			case EventToolArgs:
				parts[e.Index].ToolCall.Arguments += e.ToolCall.Arguments
			case EventFinish:
				r.Finish = e.Finish
			case EventUsage:
				r.Usage.merge(e.Usage)
			case EventDone:
				done = true
			}
		})
	})
	if err != nil {
		t.Fatalf("%v stream does not decode: %v\n%s", api, err, stream)
	}
	for _, i := range order {
		r.Content = append(r.Content, *parts[i])
	}
	return r, done
}

// checkAnswer checks the recorded answer's meaning survived: text, the tool call, the
// finish reason and the usage.
func checkAnswer(t *testing.T, what string, r *Response) {
	t.Helper()
	var text, args, name string
	for _, p := range r.Content {
		switch p.Kind {
		case PartText:
			text += p.Text
		case PartToolCall:
			name, args = p.ToolCall.Name, p.ToolCall.Arguments
		}
	}
	if text != "Let me look." || name != "lookup" || gjson.Get(args, "text").Str != "red" {
		t.Errorf("%s: text %q, tool %q(%s)", what, text, name, args)
	}
	if r.Finish != FinishToolCalls {
		t.Errorf("%s: finish %v, want tool calls", what, r.Finish)
	}
	if r.Usage.Input != 20 || r.Usage.Output != 9 || r.Usage.CacheRead != 4 {
		t.Errorf("%s: usage %+v, want 20 in (4 cached), 9 out", what, r.Usage)
	}
}

func TestStreamsEveryPairEverySplit(t *testing.T) {
	o := ResponseOptions{PublicModel: "public-model", Created: 42, IncludeUsage: true}
	for _, up := range apis {
		in := recorded(t, "streams", up, "sse")
		for _, client := range apis {
			tr, ok := New(client, up)
			if !ok {
				continue
			}
			name := up.String() + "→" + client.String()
			whole, err := tr.Stream(o).Write(in, true)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			whole = bytes.Clone(whole)
			got, done := collect(t, client, whole)
			if !done {
				t.Errorf("%s: the client's stream has no end", name)
			}
			checkAnswer(t, name, got)
			if bytes.Contains(whole, []byte(`"demo"`)) || !bytes.Contains(whole, []byte(`"public-model"`)) {
				t.Errorf("%s: the upstream's model id reaches the client", name)
			}
			for split := 1; split < len(in); split++ {
				s := tr.Stream(o)
				a, err := s.Write(in[:split], false)
				out := bytes.Clone(a)
				if err == nil {
					var b []byte
					b, err = s.Write(in[split:], true)
					out = append(out, b...)
				}
				if err != nil || !bytes.Equal(out, whole) {
					t.Fatalf("%s split at %d: %v\n%s\nwant\n%s", name, split, err, out, whole)
				}
			}
		}
	}
}

// TestMessageStartIsUnfinished: a translated Messages stream opens, as Anthropic's does,
// with a message whose stop_reason and stop_sequence are null (the answer has not ended:
// SDKs read a string there as a finished message), and ends with both in message_delta.
func TestMessageStartIsUnfinished(t *testing.T) {
	for _, up := range []API{Chat, Responses} {
		tr, _ := New(Messages, up)
		out, err := tr.Stream(ResponseOptions{PublicModel: "m"}).Write(recorded(t, "streams", up, "sse"), true)
		if err != nil {
			t.Fatalf("%v→messages: %v", up, err)
		}
		var start, delta gjson.Result
		err = sse.NewDecoder(0).Feed(out, func(ev *sse.Event) error {
			switch string(ev.Name) {
			case "message_start":
				start = gjson.ParseBytes(ev.Data).Get("message")
			case "message_delta":
				delta = gjson.ParseBytes(ev.Data).Get("delta")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"stop_reason", "stop_sequence"} {
			if v := start.Get(f); !v.Exists() || v.Type != gjson.Null {
				t.Errorf("%v→messages: message_start %s = %s, want null\n%s", up, f, v.Raw, start.Raw)
			}
		}
		if delta.Get("stop_reason").Type != gjson.String {
			t.Errorf("%v→messages: message_delta stop_reason %s", up, delta.Get("stop_reason").Raw)
		}
	}
}

func TestAStreamCutShortHasNoEnd(t *testing.T) {
	for _, up := range apis {
		in := recorded(t, "streams", up, "sse")
		cut := in[:len(in)/2]
		for _, client := range apis {
			tr, ok := New(client, up)
			if !ok {
				continue
			}
			out, err := tr.Stream(ResponseOptions{PublicModel: "m"}).Write(cut, true)
			if err != nil {
				t.Fatalf("%v→%v: %v", up, client, err)
			}
			if _, done := collect(t, client, out); done {
				t.Errorf("%v→%v: a cut stream was given an end", up, client)
			}
		}
	}
}

func TestAnErrorInsideAStreamIsTheClientsErrorEvent(t *testing.T) {
	upstream := map[API]string{
		Chat:      "data: {\"error\":{\"message\":\"secret provider words\",\"type\":\"server_error\"}}\n\n",
		Messages:  "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"secret provider words\"}}\n\n",
		Responses: "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"secret provider words\"}\n\n",
	}
	want := map[API]string{Chat: `"code":"upstream_error"`, Messages: "event: error", Responses: `"upstream_error"`}
	for up, in := range upstream {
		for _, client := range apis {
			tr, ok := New(client, up)
			if !ok {
				continue
			}
			out, err := tr.Stream(ResponseOptions{PublicModel: "m"}).Write([]byte(in), true)
			if err != nil || !bytes.Contains(out, []byte(want[client])) || bytes.Contains(out, []byte("secret")) {
				t.Errorf("%v→%v: %v\n%s", up, client, err, out)
			}
		}
	}
}

func TestResponsesEveryPair(t *testing.T) {
	o := ResponseOptions{PublicModel: "public-model", Created: 42}
	for _, up := range apis {
		in := recorded(t, "responses", up, "json")
		for _, client := range apis {
			tr, ok := New(client, up)
			if !ok {
				continue
			}
			out, err := tr.Response(in, o)
			if err != nil {
				t.Fatalf("%v→%v: %v", up, client, err)
			}
			if gjson.GetBytes(out, "model").Str != "public-model" {
				t.Errorf("%v→%v: model %s", up, client, gjson.GetBytes(out, "model").Raw)
			}
			back, err := codecs[client].decodeResponse(out)
			if err != nil {
				t.Fatalf("%v→%v: the client's answer does not decode: %v\n%s", up, client, err, out)
			}
			checkAnswer(t, up.String()+"→"+client.String(), back)
		}
	}
	if _, err := codecs[Chat].decodeResponse([]byte(`<html>`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("HTML answer: %v, want ErrMalformed", err)
	}
}

func TestRequestsEveryPair(t *testing.T) {
	requests := map[API]string{
		Chat: `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"find red"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
			{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"text\":\"red\"}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"found"}],
			"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],"tool_choice":"auto","max_tokens":50,"temperature":0.5,"user":"u1","stream":true}`,
		Messages: `{"model":"m","system":"be brief","max_tokens":50,"temperature":0.5,"metadata":{"user_id":"u1"},"stream":true,
			"messages":[{"role":"user","content":[{"type":"text","text":"find red"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"lookup","input":{"text":"red"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"found"}]}],
			"tools":[{"name":"lookup","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"}}`,
		Responses: `{"model":"m","instructions":"be brief","max_output_tokens":50,"temperature":0.5,"user":"u1","stream":true,
			"input":[{"role":"user","content":[{"type":"input_text","text":"find red"},{"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"auto"}]},
			{"type":"function_call","call_id":"call_1","name":"lookup","arguments":"{\"text\":\"red\"}"},
			{"type":"function_call_output","call_id":"call_1","output":"found"}],
			"tools":[{"type":"function","name":"lookup","parameters":{"type":"object"}}],"tool_choice":"auto"}`,
	}
	for _, client := range apis {
		for _, up := range apis {
			tr, ok := New(client, up)
			if !ok {
				continue
			}
			out, err := tr.Request([]byte(requests[client]), RequestOptions{UpstreamModel: "up-model", MaxOutput: 4096})
			if err != nil {
				t.Fatalf("%v→%v: %v", client, up, err)
			}
			r, err := codecs[up].decodeRequest(out)
			if err != nil {
				t.Fatalf("%v→%v: the upstream body does not decode: %v\n%s", client, up, err, out)
			}
			name := client.String() + "→" + up.String()
			if r.Model != "up-model" || r.MaxOutput != 50 || !r.Stream || r.User != "u1" || *r.Temperature != 0.5 {
				t.Errorf("%s: %+v", name, r)
			}
			if strings.Join(r.System, "") != "be brief" || len(r.Tools) != 1 || r.Tools[0].Name != "lookup" || r.ToolChoice == nil || r.ToolChoice.Mode != ToolAuto {
				t.Errorf("%s: system %q tools %+v choice %+v", name, r.System, r.Tools, r.ToolChoice)
			}
			var kinds []PartKind
			var callID, resultID string
			for _, m := range r.Messages {
				for _, p := range m.Parts {
					kinds = append(kinds, p.Kind)
					if p.Kind == PartToolCall {
						callID = p.ToolCall.ID
					}
					if p.Kind == PartToolResult {
						resultID = p.ToolResult.CallID
					}
					if p.Kind == PartImage && (p.Image.MediaType != "image/png" || p.Image.Data != "AAAA") {
						t.Errorf("%s: image %+v", name, p.Image)
					}
				}
			}
			if len(kinds) != 4 || callID != "call_1" || resultID != "call_1" {
				t.Errorf("%s: parts %v, call %q result %q\n%s", name, kinds, callID, resultID, out)
			}
		}
	}
}

// TestChatToolCallWithoutContent: the assistant turn the official OpenAI SDKs send back
// in a tool round trip (message.ToParam()) has tool_calls and no content at all; toward
// another API it becomes that API's tool call, and the tool message its tool result.
func TestChatToolCallWithoutContent(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"find red"},
		{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"text\":\"red\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"found"}],
		"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]}`
	want := map[API][]string{
		Messages:  {"messages.1.content.#", "1", "messages.1.content.0.type", "tool_use", "messages.1.content.0.id", "call_1", "messages.1.content.0.input.text", "red", "messages.2.content.0.type", "tool_result", "messages.2.content.0.tool_use_id", "call_1"},
		Responses: {"input.1.type", "function_call", "input.1.call_id", "call_1", "input.2.type", "function_call_output", "input.2.output", "found"},
	}
	for up, checks := range want {
		tr, _ := New(Chat, up)
		out, err := tr.Request([]byte(body), RequestOptions{UpstreamModel: "u", MaxOutput: 10})
		if err != nil {
			t.Fatalf("chat→%v: %v", up, err)
		}
		for i := 0; i < len(checks); i += 2 {
			if got := gjson.GetBytes(out, checks[i]).String(); got != checks[i+1] {
				t.Errorf("chat→%v: %s = %q, want %q\n%s", up, checks[i], got, checks[i+1], out)
			}
		}
	}
}

func TestRefusedFields(t *testing.T) {
	for _, tc := range []struct {
		client, up API
		body       string
		param      string
	}{
		{Chat, Messages, `{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true}`, "logprobs"},
		{Chat, Messages, `{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":1.5}`, "temperature"},
		{Chat, Messages, `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`, "response_format"},
		{Chat, Responses, `{"model":"m","messages":[{"role":"user","content":"x"}],"stop":["a"]}`, "stop"},
		{Messages, Chat, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"top_k":3}`, "top_k"},
		{Messages, Chat, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"provider_extension":1}`, "provider_extension"},
		{Responses, Chat, `{"model":"m","input":"x","previous_response_id":"resp_1"}`, "previous_response_id"},
		{Chat, Messages, `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","function_call":{"name":"f","arguments":"{}"}}]}`, "messages[1].function_call"},
		{Chat, Messages, `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, "messages[0].content[0]"},
	} {
		tr, _ := New(tc.client, tc.up)
		_, err := tr.Request([]byte(tc.body), RequestOptions{UpstreamModel: "u", MaxOutput: 10})
		var u *Unsupported
		if !errors.As(err, &u) || u.Param != tc.param {
			t.Errorf("%v→%v %s: %v, want refused naming %s", tc.client, tc.up, tc.body, err, tc.param)
		}
	}
	// Harmless fields are dropped; n = 1 and truncation "disabled" pass.
	tr, _ := New(Chat, Messages)
	out, err := tr.Request([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"seed":3,"store":true,"n":1}`), RequestOptions{UpstreamModel: "u", MaxOutput: 10})
	if err != nil || gjson.GetBytes(out, "seed").Exists() || gjson.GetBytes(out, "max_tokens").Int() != 10 {
		t.Errorf("dropped fields: %v %s", err, out)
	}
}
