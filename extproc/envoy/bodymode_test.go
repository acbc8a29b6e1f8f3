package envoy_test

import (
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
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
	if r.GetModeOverride().GetResponseBodyMode().String() != "STREAMED" {
		t.Fatalf("mode = %v", r.GetModeOverride())
	}
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
