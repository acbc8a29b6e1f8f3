package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/wire"
)

const msgs = `"messages":[{"role":"user","content":"hi"}]`

func TestParseMessagesRules(t *testing.T) {
	type want struct {
		code  apierr.Code
		param string
	}
	ok := want{}
	base := `{"model":"m","max_tokens":10,` + msgs
	tests := []struct {
		name string
		body string
		want want
	}{
		{name: "minimal", body: base + `}`, want: ok},
		{name: "array root", body: `[` + base + `}]`, want: want{apierr.InvalidRequest, ""}},
		{name: "duplicate max_tokens", body: base + `,"max_tokens":1}`, want: want{apierr.InvalidRequest, "max_tokens"}},
		{name: "model 256", body: `{"model":"` + strings.Repeat("a", 256) + `","max_tokens":1,` + msgs + `}`, want: ok},
		{name: "model 257", body: `{"model":"` + strings.Repeat("a", 257) + `","max_tokens":1,` + msgs + `}`, want: want{apierr.InvalidModel, "model"}},
		{name: "model with newline", body: `{"model":"a\nb","max_tokens":1,` + msgs + `}`, want: want{apierr.InvalidModel, "model"}},
		{name: "max_tokens missing", body: `{"model":"m",` + msgs + `}`, want: want{apierr.InvalidMaxTokens, "max_tokens"}},
		{name: "max_tokens null", body: `{"model":"m","max_tokens":null,` + msgs + `}`, want: want{apierr.InvalidMaxTokens, "max_tokens"}},
		{name: "max_tokens 1", body: `{"model":"m","max_tokens":1,` + msgs + `}`, want: ok},
		{name: "max_tokens 0", body: `{"model":"m","max_tokens":0,` + msgs + `}`, want: want{apierr.InvalidMaxTokens, "max_tokens"}},
		{name: "max_tokens 1.0", body: `{"model":"m","max_tokens":1.0,` + msgs + `}`, want: want{apierr.InvalidMaxTokens, "max_tokens"}},
		{name: "max_tokens 1e3", body: `{"model":"m","max_tokens":1e3,` + msgs + `}`, want: want{apierr.InvalidMaxTokens, "max_tokens"}},
		{name: "max_tokens -1", body: `{"model":"m","max_tokens":-1,` + msgs + `}`, want: want{apierr.InvalidMaxTokens, "max_tokens"}},
		{name: "max_tokens huge", body: `{"model":"m","max_tokens":123456789012345678901234,` + msgs + `}`, want: want{apierr.InvalidMaxTokens, "max_tokens"}},
		{name: "messages missing", body: `{"model":"m","max_tokens":1}`, want: want{apierr.InvalidRequest, "messages"}},
		{name: "messages empty", body: `{"model":"m","max_tokens":1,"messages":[]}`, want: want{apierr.InvalidRequest, "messages"}},
		{name: "system role refused", body: `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"x"}]}`, want: want{apierr.InvalidRequest, "messages[0].role"}},
		{name: "content missing", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user"}]}`, want: want{apierr.InvalidRequest, "messages[0].content"}},
		{name: "content null", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":null}]}`, want: want{apierr.InvalidRequest, "messages[0].content"}},
		{name: "block without type", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"text":"a"}]}]}`, want: want{apierr.InvalidRequest, "messages[0].content[0].type"}},
		{name: "text block without text", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text"}]}]}`, want: want{apierr.InvalidRequest, "messages[0].content[0].text"}},
		{name: "nested tool_result block", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":1}]}]}]}`, want: want{apierr.InvalidRequest, "messages[0].content[0].content[0].text"}},
		{name: "system number", body: base + `,"system":1}`, want: want{apierr.InvalidRequest, "system"}},
		{name: "system blocks", body: base + `,"system":[{"type":"text","text":"s"}]}`, want: ok},
		{name: "system block bad", body: base + `,"system":[{"type":"text"}]}`, want: want{apierr.InvalidRequest, "system[0].text"}},
		{name: "tools object", body: base + `,"tools":{}}`, want: want{apierr.InvalidRequest, "tools"}},
		{name: "stream true", body: base + `,"stream":true}`, want: ok},
		{name: "stream string", body: base + `,"stream":"true"}`, want: want{apierr.InvalidStream, "stream"}},
		{name: "stream 1", body: base + `,"stream":1}`, want: want{apierr.InvalidStream, "stream"}},
		{name: "stream null", body: base + `,"stream":null}`, want: want{apierr.InvalidStream, "stream"}},
		{name: "temperature 0", body: base + `,"temperature":0}`, want: ok},
		{name: "temperature 1", body: base + `,"temperature":1}`, want: ok},
		{name: "temperature 1.0000001", body: base + `,"temperature":1.0000001}`, want: want{apierr.InvalidRequest, "temperature"}},
		{name: "temperature string", body: base + `,"temperature":"0.5"}`, want: want{apierr.InvalidRequest, "temperature"}},
		{name: "top_p 1", body: base + `,"top_p":1}`, want: ok},
		{name: "top_p 1.01", body: base + `,"top_p":1.01}`, want: want{apierr.InvalidRequest, "top_p"}},
		{name: "top_k string", body: base + `,"top_k":"5"}`, want: want{apierr.InvalidRequest, "top_k"}},
		{name: "stop_sequences string", body: base + `,"stop_sequences":"x"}`, want: want{apierr.InvalidRequest, "stop_sequences"}},
		{name: "stop_sequences numbers", body: base + `,"stop_sequences":["a",1]}`, want: want{apierr.InvalidRequest, "stop_sequences"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMessages([]byte(tt.body))
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

func TestParseCountTokensSkipsGenerationFields(t *testing.T) {
	p, err := ParseCountTokens([]byte(`{"model":"m",` + msgs + `,"temperature":9,"stream":"x","system":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxOutput != 0 || p.MaxOutputParam != "" || p.Prompt.Messages != 1 || len(p.Prompt.Texts) != 2 {
		t.Fatalf("parsed %+v", p)
	}
}

// FuzzParse checks that neither parser panics or accepts a body encoding/json rejects.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":10,` + msgs + `}`))
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"a"}]}]}],"system":[{"type":"text","text":"s"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		valid := json.Valid(body)
		if _, err := ParseMessages(body); err == nil && !valid {
			t.Fatalf("ParseMessages accepted %q", body)
		}
		if _, err := ParseCountTokens(body); err == nil && !valid {
			t.Fatalf("ParseCountTokens accepted %q", body)
		}
	})
}

func TestParseMessagesParts(t *testing.T) {
	tests := []struct {
		name string
		body string
		want wire.Prompt
	}{
		{
			name: "tools and tool_use input as JSON",
			body: `{"model":"m","max_tokens":5,"system":"s","tools":[{"name":"t","input_schema":{}}],"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"i","name":"t","input":{"a":1}}]}]}`,
			want: wire.Prompt{Texts: []string{"t", "s"}, Messages: 1, Tools: true,
				JSON: []string{`{"a":1}`, `"tools":[{"name":"t","input_schema":{}}]`}},
		},
		{
			name: "documents by source",
			body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x"}},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}},{"type":"document","source":{"type":"text","media_type":"text/plain","data":"plain words"}},{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`,
			want: wire.Prompt{Texts: []string{"plain words"}, Messages: 1, Images: 1,
				Documents: []wire.Document{{Param: "messages[0].content[1].source.data", Data: "JVBERi0="}},
				Unbounded: "messages[0].content[3].source"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseMessages([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, p.Prompt); d != "" {
				t.Fatalf("prompt (-want +got):\n%s", d)
			}
		})
	}
}
