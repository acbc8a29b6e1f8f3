package response

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChatEventWalk: only the top-level "model" of a chat chunk is replaced, never a
// nested one or one inside a string, across escapes, unicode and spacing; a chunk that is
// not one object passes unchanged; each case holds split at every byte.
func TestChatEventWalk(t *testing.T) {
	long := strings.Repeat("x", 13)
	tests := []struct {
		name, data, want string
		text             string // output text counted
	}{
		{
			name: "nested model members stay",
			data: `{"meta":{"model":"u"},"choices":[{"model":"u","delta":{"model":"u","content":"a"}}],"model":"u"}`,
			want: `{"meta":{"model":"u"},"choices":[{"model":"u","delta":{"model":"u","content":"a"}}],"model":"p"}`,
			text: "a",
		},
		{
			name: "model inside strings stays",
			data: `{"id":"\"model\":\"u\"","choices":[{"delta":{"content":"{\"model\":\"u\"}"}}],"model":"u"}`,
			want: `{"id":"\"model\":\"u\"","choices":[{"delta":{"content":"{\"model\":\"u\"}"}}],"model":"p"}`,
			text: `{"model":"u"}`,
		},
		{
			name: "escaped quotes and backslashes at every word offset",
			data: `{"a":"` + long[:7] + `\"","b":"` + long[:8] + `\\","c":"` + long + `\\\"\\","model":"u"}`,
			want: `{"a":"` + long[:7] + `\"","b":"` + long[:8] + `\\","c":"` + long + `\\\"\\","model":"p"}`,
		},
		{
			name: "a key spelled with an escape is not model",
			data: `{"mod\u0065l":"u","model":"u"}`,
			want: `{"mod\u0065l":"u","model":"p"}`,
		},
		{
			name: "unicode escapes and raw UTF-8 in counted text",
			data: `{"model":"u","choices":[{"delta":{"content":"caf\u00e9 \ud83d\ude00 é"}}]}`,
			want: `{"model":"p","choices":[{"delta":{"content":"caf\u00e9 \ud83d\ude00 é"}}]}`,
			text: "café 😀 é",
		},
		{
			name: "space everywhere",
			data: " {\t\"model\" :\t\"u\" , \"choices\" : [ { \"delta\" : { \"content\" : \"hi\" , \"refusal\" : null } } , 7 ] } \t",
			want: " {\t\"model\" :\t\"p\" , \"choices\" : [ { \"delta\" : { \"content\" : \"hi\" , \"refusal\" : null } } , 7 ] } \t",
			text: "hi",
		},
		{
			name: "every top-level model is replaced, whatever its value",
			data: `{"model":{"a":"u"},"x":1,"model":42}`,
			want: `{"model":"p","x":1,"model":"p"}`,
		},
		{
			name: "tool call arguments and refusal counted",
			data: `{"model":"u","choices":[{"index":0,"delta":{"refusal":"no","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`,
			want: `{"model":"p","choices":[{"index":0,"delta":{"refusal":"no","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`,
			text: `no{"a":1}`,
		},
		{name: "trailing comma", data: `{"model":"u",}`, want: `{"model":"u",}`},
		{name: "trailing comma in choices", data: `{"model":"u","choices":[{"delta":{}},]}`, want: `{"model":"u","choices":[{"delta":{}},]}`},
		{name: "missing colon", data: `{"model" "u"}`, want: `{"model" "u"}`},
		{name: "unterminated string", data: `{"model":"u","id":"ab\"}`, want: `{"model":"u","id":"ab\"}`},
		{name: "bytes after the object", data: `{"model":"u"} x`, want: `{"model":"u"} x`},
		{name: "two objects", data: `{"model":"u"}{}`, want: `{"model":"u"}{}`},
		{name: "unbalanced nested value", data: `{"model":"u","x":[{]}`, want: `{"model":"u","x":[{]}`},
		{name: "an array", data: `[{"model":"u"}]`, want: `[{"model":"u"}]`},
		{name: "empty object", data: `{ }`, want: `{ }`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := "data: " + tt.data + "\n\n: comment\n\n"
			want := "data: " + tt.want + "\n\n: comment\n\n"
			for _, chunks := range chunkings([]byte(in)) {
				var text string
				opts := Options{Format: OpenAIChat, PublicModel: "p", Stream: true, ClientWantsUsage: true,
					CountTokens: func(s string) int { text += s; return len(s) }}
				out, rw := feed(t, opts, chunks...)
				if string(out) != want {
					t.Fatalf("got %q, want %q", out, want)
				}
				rw.Delivered()
				if text != tt.text {
					t.Fatalf("counted %q, want %q", text, tt.text)
				}
			}
		})
	}
}

// chatOutcome is everything one chat event walk decides.
type chatOutcome struct {
	OK, Drop       bool
	Edits          []string
	Usage          Usage
	UsageOK        bool
	Text, Upstream string
}

func walkChat(data []byte, wantsUsage, reference bool) chatOutcome {
	r := newStream(Options{Format: OpenAIChat, PublicModel: "p", Stream: true, ClientWantsUsage: wantsUsage}, []byte(`"p"`), counter{})
	var ok bool
	if reference {
		ok = r.chatReference(data)
	} else {
		ok = r.chat(data)
	}
	o := chatOutcome{OK: ok, Drop: r.drop, Usage: r.usage, UsageOK: r.usageOK, Text: string(r.text), Upstream: r.upstream}
	for _, e := range r.edits {
		o.Edits = append(o.Edits, string(data[:e.start])+"|"+string(data[e.start:e.end])+"|"+string(e.repl))
	}
	return o
}

// FuzzChatWalk compares the chat event walk with the walk it replaced, on any bytes: the
// same verdict, edits, usage, counted text and upstream model.
func FuzzChatWalk(f *testing.F) {
	for _, tt := range []string{
		`{"id":"c","model":"u","choices":[{"index":0,"delta":{"content":"a\"b"}}],"usage":null}`,
		`{"model":"u","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":1}}}`,
		`{"error":{"message":"m","type":"t"}}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{}"}}]}}], "model" : 1 }`,
		` {"usage": null , "model":"u"} `,
		`{"a":[{"b":"\\"},"\u00e9"],"model":"u"}`,
		`{"model":"u"`,
	} {
		f.Add([]byte(tt))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, wants := range []bool{false, true} {
			got, want := walkChat(data, wants, false), walkChat(data, wants, true)
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("%q (client wants usage %v): -reference +new\n%s", data, wants, d)
			}
		}
	})
}

// FuzzValueEnd compares the value scanner with the one it replaced at every offset.
func FuzzValueEnd(f *testing.F) {
	f.Add([]byte(`{"a":"0123456\"89","b":[1,{"c":"\\"}],"d":tru e}`))
	f.Add([]byte(`"abcdefgh\\ijklmnop\"qrstuvwxyz"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := range b {
			e1, ok1 := valueEnd(b, i)
			e2, ok2 := refValueEnd(b, i)
			if ok1 != ok2 || ok1 && e1 != e2 {
				t.Fatalf("%q at %d: got %d %v, want %d %v", b, i, e1, ok1, e2, ok2)
			}
			if b[i] == '"' {
				e1, ok1 = stringEnd(b, i)
				e2, ok2 = refStringEnd(b, i)
				if ok1 != ok2 || ok1 && e1 != e2 {
					t.Fatalf("string %q at %d: got %d %v, want %d %v", b, i, e1, ok1, e2, ok2)
				}
			}
		}
	})
}
