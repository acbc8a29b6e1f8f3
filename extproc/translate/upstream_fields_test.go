package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// upstreamAPIs are the APIs a channel may speak.
var upstreamAPIs = []API{Chat, Messages, Responses, Gemini, Bedrock, VertexMessages}

// featureSample is a request asking for one feature, and the client param a refusal of
// it names.
type featureSample struct {
	add   func(r *Request)
	param string
}

// sampleBase is a request asking for nothing but its text turns.
func sampleBase() *Request {
	return &Request{Client: Chat, Model: "m", Messages: []Message{
		{Role: RoleUser, Parts: []Part{{Kind: PartText, Text: "hello"}}},
		{Role: RoleAssistant, Parts: []Part{{Kind: PartText, Text: "hi"}}},
		{Role: RoleUser, Parts: []Part{{Kind: PartText, Text: "more"}}},
	}}
}

func addImage(im Image) func(r *Request) {
	return func(r *Request) {
		im := im // each request its own, as drop edits it
		r.Messages[2].Parts = append(r.Messages[2].Parts, Part{Kind: PartImage, Image: &im})
	}
}

func addTools(r *Request) {
	r.Tools = []Tool{{Name: "lookup", Description: "finds", Parameters: json.RawMessage(`{"type":"object"}`)}}
}

func addToolRound(result ...Part) func(r *Request) {
	return func(r *Request) {
		addTools(r)
		r.Messages[1].Parts = append(r.Messages[1].Parts, Part{Kind: PartToolCall, ToolCall: &ToolCall{ID: "call_1", Name: "lookup", Arguments: `{"q":"x"}`}})
		r.Messages[2].Parts = append([]Part{{Kind: PartToolResult, ToolResult: &ToolResult{CallID: "call_1", Content: slices.Clone(result)}}}, r.Messages[2].Parts...)
	}
}

func ptr[T any](v T) *T { return &v }

const png = "iVBORw0KGgo="

// featureSamples ask for each feature, from a Chat client (whose params a refusal names).
var featureSamples = [numFeatures]featureSample{
	fSystem:          {func(r *Request) { r.System = []string{"be brief"} }, "messages"},
	fTurns:           {func(r *Request) {}, "messages[0]"},
	fImageBytes:      {addImage(Image{MediaType: "image/png", Data: png}), "messages[2]"},
	fImageURL:        {addImage(Image{URL: "https://example.com/cat.png"}), "messages[2]"},
	fImageType:       {addImage(Image{MediaType: "image/bmp", Data: "Qk0="}), "messages[2]"},
	fImageDetail:     {addImage(Image{MediaType: "image/png", Data: png, Detail: "high"}), "messages[2]"},
	fToolCalls:       {addToolRound(Part{Kind: PartText, Text: "found"}), "messages[1]"},
	fToolResultImage: {addToolRound(Part{Kind: PartImage, Image: &Image{MediaType: "image/png", Data: png}}), "messages[2]"},
	fTools:           {addTools, "tools"},
	fToolStrict: {func(r *Request) {
		addTools(r)
		r.Tools[0].Strict = ptr(true)
	}, "tools"},
	fToolChoice: {func(r *Request) {
		addTools(r)
		r.ToolChoice = &ToolChoice{Mode: ToolRequired}
	}, "tool_choice"},
	fToolChoiceNone: {func(r *Request) {
		addTools(r)
		r.ToolChoice = &ToolChoice{Mode: ToolNone}
	}, "tool_choice"},
	fParallelToolCalls: {func(r *Request) {
		addTools(r)
		r.ParallelToolCalls = ptr(false)
	}, "parallel_tool_calls"},
	fMaxOutput:         {func(r *Request) { r.MaxOutput = 77 }, "max_completion_tokens"},
	fStop:              {func(r *Request) { r.Stop, r.StopParam = []string{"END"}, "stop" }, "stop"},
	fTemperature:       {func(r *Request) { r.Temperature = ptr(0.5) }, "temperature"},
	fTemperatureAbove1: {func(r *Request) { r.Temperature = ptr(1.5) }, "temperature"},
	fTopP:              {func(r *Request) { r.TopP = ptr(0.9) }, "top_p"},
	fUser:              {func(r *Request) { r.User = "end-user-42" }, "user"},
	fJSONObject: {func(r *Request) {
		r.ResponseFormat = &ResponseFormat{Type: FormatJSONObject, Param: "response_format"}
	}, "response_format"},
	fJSONSchema: {func(r *Request) {
		r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, Schema: json.RawMessage(`{"type":"object"}`), Param: "response_format"}
	}, "response_format"},
	fJSONSchemaOptions: {func(r *Request) {
		r.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, Name: "answer_schema", Strict: ptr(true),
			Schema: json.RawMessage(`{"type":"object"}`), Param: "response_format"}
	}, "response_format"},
}

// encodeAdmitted is the upstream body of r as Translator.Request writes it.
func encodeAdmitted(up API, r *Request) ([]byte, error) {
	if err := admit(up, r); err != nil {
		return nil, err
	}
	c, _ := upstreamCodec(up)
	return c.encodeRequest(r, RequestOptions{UpstreamModel: "u", MaxOutput: 10})
}

// TestUpstreamTablesComplete: every upstream API has a table deciding every feature,
// every feature is named, found and dropped, and every table is in the docs.
func TestUpstreamTablesComplete(t *testing.T) {
	documented := map[*upstreamTable]bool{}
	for _, d := range upstreamDocs {
		documented[d.table] = true
	}
	for _, up := range upstreamAPIs {
		table := upstreamFields(up)
		if table == nil {
			t.Errorf("%v has no upstream table", up)
			continue
		}
		if !documented[table] {
			t.Errorf("%v's table is not in upstreamDocs", up)
		}
		for id, e := range table {
			if e.fate == 0 || e.note == "" {
				t.Errorf("%v: feature %q has no fate or note", up, features[id].name)
			}
		}
	}
	for id, f := range features {
		if f.name == "" || f.find == nil || f.drop == nil || f.params == [numClientAPIs]string{} || featureSamples[id].add == nil {
			t.Errorf("feature %d (%q) lacks a name, find, drop, params or sample", id, f.name)
		}
	}
}

// TestUpstreamTablesAreTheBehaviour: for every upstream API and feature, what the table
// says is what the upstream body gets. Mapped: the body differs from the same request
// without the feature. Dropped: the body is that of the request without it. Refused: the
// request is refused naming the client's param, with the table's words.
func TestUpstreamTablesAreTheBehaviour(t *testing.T) {
	for _, up := range upstreamAPIs {
		for id := range numFeatures {
			f, e, s := &features[id], upstreamFields(up)[id], featureSamples[id]
			with := sampleBase()
			s.add(with)
			if _, ok := f.find(with); !ok {
				t.Fatalf("%q: its sample does not ask for it", f.name)
			}
			without := sampleBase()
			s.add(without)
			f.drop(without)
			if _, ok := f.find(without); ok {
				t.Fatalf("%q: drop leaves it in the request", f.name)
			}
			name := up.String() + "/" + f.name
			got, err := encodeAdmitted(up, with)
			if e.fate == Refused {
				var u *Unsupported
				if !errors.As(err, &u) || u.Param != s.param || !strings.Contains(u.Message, e.note) {
					t.Errorf("%s: %v, want refused naming %s with %q", name, err, s.param, e.note)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			base, err := encodeAdmitted(up, without)
			if err != nil {
				t.Fatalf("%s without it: %v", name, err)
			}
			if same := bytes.Equal(got, base); same != (e.fate == Dropped) {
				t.Errorf("%s is %v, but the body %s without it:\n%s\n%s", name, e.fate,
					map[bool]string{true: "is the same", false: "differs"}[same], got, base)
			}
		}
	}
}

// TestCloudRefusals: a client's request toward each cloud API is refused by its table,
// with the table's words and the client's param.
func TestCloudRefusals(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	for _, tc := range []struct {
		client, up API
		body       string
		param, msg string
	}{
		{Chat, Gemini, `{"model":"m","messages":[` + user + `,{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`,
			"messages[1]", "This model's upstream API cannot take the image given by URL: it takes images by their bytes only; send the image's bytes."},
		{Messages, Gemini, `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}]}`,
			"messages[1]", "This model's upstream API cannot take the tool result with an image: its tool results carry text only."},
		{Chat, Bedrock, `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_object"}}`,
			"response_format", "This model's upstream API cannot take the JSON output (json_object): it has no structured output format."},
		{Responses, Bedrock, `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"}}}}`,
			"text.format", "This model's upstream API cannot take the JSON schema output (json_schema): it has no structured output format."},
		{Chat, Bedrock, `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
			"tool_choice", "This model's upstream API cannot take the tool choice none (tools given): it cannot be told not to call the tools it is given."},
		{Chat, Bedrock, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/bmp;base64,Qk0="}}]}]}`,
			"messages[0]", "This model's upstream API cannot take the image bytes other than PNG, JPEG, GIF or WebP: it takes PNG, JPEG, GIF and WebP images only."},
		{Chat, VertexMessages, `{"model":"m","messages":[` + user + `],"temperature":1.5}`,
			"temperature", "This model's upstream API cannot take the temperature above 1: it takes a temperature between 0 and 1."},
		{Responses, VertexMessages, `{"model":"m","input":"hi","text":{"format":{"type":"json_object"}}}`,
			"text.format", "This model's upstream API cannot take the JSON output (json_object): it has no structured output format."},
	} {
		tr, _ := New(tc.client, tc.up)
		_, err := tr.Request([]byte(tc.body), RequestOptions{UpstreamModel: "u", MaxOutput: 10})
		var u *Unsupported
		if !errors.As(err, &u) || u.Param != tc.param || u.Message != tc.msg {
			t.Errorf("%v→%v: %v, want refused naming %s: %q", tc.client, tc.up, err, tc.param, tc.msg)
		}
	}
}

// TestCloudDrops: what a cloud API's table drops does not reach its body, and the
// request is served.
func TestCloudDrops(t *testing.T) {
	chat := `{"model":"m","user":"end-user-42","parallel_tool_calls":false,
		"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"high"}}]}],
		"tools":[{"type":"function","function":{"name":"lookup","strict":true,"parameters":{"type":"object"}}}]`
	for _, tc := range []struct {
		up      API
		body    string
		absent  []string
		present []string
	}{
		{Gemini, chat + `,"response_format":{"type":"json_schema","json_schema":{"name":"answer_schema","strict":true,"schema":{"type":"object"}}}}`,
			[]string{"end-user-42", "high", "strict", "answer_schema", "parallel"}, []string{"inlineData", "functionDeclarations", "responseJsonSchema"}},
		{Bedrock, chat + `}`,
			[]string{"end-user-42", "high", "strict", "parallel"}, []string{`"image"`, "toolSpec"}},
		{VertexMessages, chat + `}`,
			[]string{"high", "strict"}, []string{`"user_id":"end-user-42"`, `"disable_parallel_tool_use":true`, `"image"`}},
	} {
		tr, _ := New(Chat, tc.up)
		out, err := tr.Request([]byte(tc.body), RequestOptions{UpstreamModel: "u", MaxOutput: 10})
		if err != nil {
			t.Fatalf("%v: %v", tc.up, err)
		}
		for _, s := range tc.absent {
			if bytes.Contains(out, []byte(s)) {
				t.Errorf("%v: %q reached the upstream body:\n%s", tc.up, s, out)
			}
		}
		for _, s := range tc.present {
			if !bytes.Contains(out, []byte(s)) {
				t.Errorf("%v: %q is missing from the upstream body:\n%s", tc.up, s, out)
			}
		}
	}
}
