package envoy_test

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
)

// TestStreamedWholeBodyInOneMessage: in STREAMED mode, a small fast answer reaches
// extproc as one response_body with the entire body and end_of_stream true (it arrived
// while Envoy awaited the headers reply). It is rewritten and settled like any stream,
// and its reply sets no content-length (removed at the headers, so Envoy's check of the
// mutated body's length has nothing to refuse).
func TestStreamedWholeBodyInOneMessage(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	stream := "data: {\"id\":\"c\",\"model\":\"mock-gpt\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n" +
		"data: {\"id\":\"c\",\"model\":\"mock-gpt\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n"
	x := admit(t, h, `{"model":"demo-chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`)
	r := x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
	checkMode(t, r, buffered, streamed)
	r = x.Send(replay.ResponseBody([]byte(stream), true))
	c := r.GetResponseBody().GetResponse()
	if want := strings.ReplaceAll(stream, "mock-gpt", "demo-chat"); string(c.GetBodyMutation().GetBody()) != want {
		t.Errorf("body %q, want %q", c.GetBodyMutation().GetBody(), want)
	}
	if hs := setHeaders(t, c); hs["content-length"] != "" {
		t.Errorf("the reply sets content-length %q", hs["content-length"])
	}
	x.Close()
	if len(f.Commits) != 1 || f.Commits[0].Usage.InputTokens != 10 || f.Commits[0].Usage.OutputTokens != 3 || len(f.Releases) != 0 {
		t.Errorf("commits %+v releases %v", f.Commits, f.Releases)
	}
}

// TestJSONBodyModeBySize: a non-streamed JSON success is BUFFERED only when its
// content-length says it is well below Envoy's buffer limit. Any other (no length, a
// large one, a compressed body whose decoded size is unknown) is STREAMED, rewritten
// as it passes with content-length removed, and charged exactly its usage: Envoy
// answers a BUFFERED body over its limit with its own 500 after the provider billed
// the call.
func TestJSONBodyModeBySize(t *testing.T) {
	const limit = lifecycle.EnvoyBufferLimit
	pad := strings.Repeat("x", 3<<20) // over the limit
	tests := []struct {
		name, path, req string
		up, public      string
		extra           []string // response headers besides content-type
		length          int      // content-length sent, -1: none, 0: the body's
		wantMode        filterv3.ProcessingMode_BodySendMode
		in, out         int64
	}{
		{name: "chat, small", path: "/v1/chat/completions", req: chatOK, public: "demo-chat",
			up:     `{"id":"c","model":"mock-gpt","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1000,"completion_tokens":500}}`,
			length: 0, wantMode: buffered, in: 1000, out: 500},
		{name: "chat, at the threshold", path: "/v1/chat/completions", req: chatOK, public: "demo-chat",
			up:     `{"id":"c","model":"mock-gpt","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1000,"completion_tokens":500}}`,
			length: limit / 2, wantMode: buffered},
		{name: "chat, over the threshold", path: "/v1/chat/completions", req: chatOK, public: "demo-chat",
			up:     `{"id":"c","model":"mock-gpt","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1000,"completion_tokens":500}}`,
			length: limit/2 + 1, wantMode: streamed},
		{name: "chat, no length", path: "/v1/chat/completions", req: chatOK, public: "demo-chat",
			up:     `{"id":"c","model":"mock-gpt","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1000,"completion_tokens":500}}`,
			length: -1, wantMode: streamed, in: 1000, out: 500},
		{name: "chat over the limit", path: "/v1/chat/completions", req: chatOK, public: "demo-chat",
			up:     `{"id":"c","model":"mock-gpt","choices":[{"message":{"content":"` + pad + `"}}],"usage":{"prompt_tokens":1000,"completion_tokens":700000}}`,
			length: 0, wantMode: streamed, in: 1000, out: 700000},
		{name: "messages over the limit", path: "/v1/messages", public: "demo-claude",
			req:    `{"model":"demo-claude","max_tokens":8192,"messages":[{"role":"user","content":"hi"}]}`,
			extra:  []string{"x-api-key", keyPaid},
			up:     `{"id":"m","type":"message","model":"mock-claude","content":[{"type":"text","text":"` + pad + `"}],"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":8000}}`,
			length: 0, wantMode: streamed, in: 15, out: 8000},
		{name: "responses, no length", path: "/v1/responses", public: "demo-responses",
			req:    `{"model":"demo-responses","input":"hello world","max_output_tokens":100}`,
			up:     `{"id":"r","object":"response","model":"mock-gpt","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":10,"output_tokens":20}}`,
			length: -1, wantMode: streamed, in: 10, out: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			h := replay.Start(t, replay.Service(t, f))
			auth := tt.extra
			if auth == nil {
				auth = bearer(keyPaid)
			}
			x, _, resp := h.Post(t, tt.path, []byte(tt.req), auth...)
			if resp.GetRequestBody() == nil || resp.GetImmediateResponse() != nil {
				t.Fatalf("not admitted: %v", resp)
			}
			kv := []string{"content-type", "application/json"}
			switch {
			case tt.length == 0:
				kv = append(kv, "content-length", strconv.Itoa(len(tt.up)))
			case tt.length > 0:
				kv = append(kv, "content-length", strconv.Itoa(tt.length))
			}
			r := x.Send(replay.ResponseHeaders(200, kv...))
			checkMode(t, r, buffered, tt.wantMode)
			removed := slices.Contains(r.GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(), "content-length")
			if removed != (tt.wantMode == streamed) {
				t.Errorf("content-length removed: %v", removed)
			}
			if tt.in == 0 {
				x.Close()
				return
			}
			var out bytes.Buffer
			if tt.wantMode == buffered {
				r = x.Send(replay.ResponseBody([]byte(tt.up), true))
				out.Write(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
			} else {
				// Envoy's chunks, then its empty last one.
				for at := 0; at < len(tt.up); at += 64 << 10 {
					r = x.Send(replay.ResponseBody([]byte(tt.up[at:min(at+64<<10, len(tt.up))]), false))
					out.Write(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
				}
				r = x.Send(replay.ResponseBody(nil, true))
				out.Write(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
			}
			x.Close()
			model := strings.Split(strings.Split(tt.up, `"model":"`)[1], `"`)[0]
			if want := strings.Replace(tt.up, `"model":"`+model+`"`, `"model":"`+tt.public+`"`, 1); out.String() != want {
				t.Errorf("body changed beyond the model (%d bytes in, %d out)", len(tt.up), out.Len())
			}
			if len(f.Commits) != 1 || len(f.Releases) != 0 ||
				f.Commits[0].Usage.InputTokens != tt.in || f.Commits[0].Usage.OutputTokens != tt.out {
				t.Errorf("commits %+v releases %v, want one of %d in, %d out", f.Commits, f.Releases, tt.in, tt.out)
			}
		})
	}
}

// TestCompressedJSONStreams: a compressed answer's content-length is not its decoded
// size, so even a small one is rewritten STREAMED.
func TestCompressedJSONStreams(t *testing.T) {
	h := replay.Start(t, replay.Service(t, newFake()))
	x := admit(t, h, chatOK)
	r := x.Send(replay.ResponseHeaders(200, "content-type", "application/json", "content-encoding", "gzip", "content-length", "40"))
	checkMode(t, r, buffered, streamed)
	x.Close()
}
