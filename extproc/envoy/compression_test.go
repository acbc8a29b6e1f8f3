package envoy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
)

func TestCompressedJSONAnswerDecoded(t *testing.T) {
	up := `{"id":"resp_1","object":"response","status":"completed","model":"mock-gpt","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":10,"output_tokens":20,"total_tokens":30}}`
	for _, enc := range replay.Encodings {
		f := newFake()
		h := replay.Start(t, replay.Service(t, f))
		x := admitPath(t, h, "/v1/responses", `{"model":"demo-responses","input":"hello world","max_output_tokens":100}`)
		r := x.Send(replay.ResponseHeaders(200, "content-type", "application/json", "content-encoding", replay.HeaderName(enc), "content-length", "99"))
		rm := r.GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders()
		if countOf(rm, "content-encoding") != 1 || countOf(rm, "content-length") != 1 {
			t.Errorf("%s: headers reply removes %v, want content-encoding and content-length", enc, rm)
		}
		r = x.Send(replay.ResponseBody(replay.Compress(t, enc, []byte(up)), true))
		if got := string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()); got != strings.Replace(up, "mock-gpt", "demo-responses", 1) {
			t.Errorf("%s: body %q", enc, got)
		}
		x.Close()
		ledgerCheck(t, f, 276, 50)
	}
}

func TestCompressedStreamDecodedAtEverySplit(t *testing.T) {
	stream, err := os.ReadFile(filepath.Join("..", "response", "testdata", "responses_stream.sse"))
	if err != nil {
		t.Fatal(err)
	}
	h := replay.Start(t, replay.Service(t, newFake()))
	want := ""
	for _, enc := range append([]string{""}, replay.Encodings...) {
		body := stream
		kv := []string{"content-type", "text/event-stream"}
		if enc != "" {
			body = replay.Compress(t, enc, stream)
			kv = append(kv, "content-encoding", replay.HeaderName(enc))
		}
		for split := 0; split <= len(body); split++ {
			if enc == "" && split > 0 {
				break // the identity reference
			}
			x := admitPath(t, h, "/v1/responses", `{"model":"demo-responses","stream":true,"input":"hello world"}`)
			r := x.Send(replay.ResponseHeaders(200, kv...))
			if enc != "" && countOf(r.GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(), "content-encoding") != 1 {
				t.Fatalf("%s: content-encoding kept: %v", enc, r)
			}
			var out bytes.Buffer
			for _, part := range [][]byte{body[:split], body[split:], nil} {
				r = x.Send(replay.ResponseBody(part, part == nil))
				out.Write(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
			}
			x.Close()
			if enc == "" {
				want = out.String()
				continue
			}
			if out.String() != want {
				t.Fatalf("%s split %d: got\n%s\nwant\n%s", enc, split, out.String(), want)
			}
		}
	}
}

func TestUndecodableAnswerIsUnusable(t *testing.T) {
	up := []byte(`{"id":"resp_1","object":"response","model":"mock-gpt","output":[],"usage":{"input_tokens":1,"output_tokens":1}}`)
	gz := replay.Compress(t, "gzip", up)
	for name, c := range map[string]struct {
		enc  string
		body []byte
	}{
		"unknown encoding": {"compress", nil},
		"two encodings":    {"gzip, br", nil},
		"corrupt gzip":     {"gzip", up},
		"truncated gzip":   {"gzip", gz[:len(gz)-5]},
	} {
		f := newFake()
		h := replay.Start(t, replay.Service(t, f))
		x := admitPath(t, h, "/v1/responses", `{"model":"demo-responses","input":"hello world"}`)
		r := x.Send(replay.ResponseHeaders(200, "content-type", "application/json", "content-encoding", c.enc))
		if c.body == nil {
			checkError(t, r, want{502, "upstream_error", "api_error", "", false, ""}, false)
		} else {
			// A compressed answer's decoded size is unknown: it streams, and a body that
			// cannot be decoded is dropped (the headers went downstream already).
			if r.GetModeOverride().GetResponseBodyMode().String() != "STREAMED" {
				t.Fatalf("%s: mode %v", name, r.GetModeOverride())
			}
			r = x.Send(replay.ResponseBody(c.body, true))
			if bm := r.GetResponseBody().GetResponse().GetBodyMutation(); len(bm.GetBody()) != 0 && !bm.GetClearBody() {
				t.Errorf("%s: undecodable bytes passed: %v", name, bm)
			}
		}
		x.Close()
		if len(f.Commits) != 0 || len(f.Releases) != 1 {
			t.Errorf("%s: commits %v releases %v", name, f.Commits, f.Releases)
		}
	}
}

func TestCompressedErrorBodyClassified(t *testing.T) {
	// A compressed provider error is read like a plain one: a context-length 400 is
	// the client's invalid_request, not an upstream failure.
	up := []byte(`{"error":{"message":"This model's maximum context length is 10 tokens","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	x := admitPath(t, h, "/v1/chat/completions", chatOK)
	x.Send(replay.ResponseHeaders(400, "content-type", "application/json", "content-encoding", "br"))
	r := x.Send(replay.ResponseBody(replay.Compress(t, "br", up), true))
	plainF := newFake()
	ph := replay.Start(t, replay.Service(t, plainF))
	px := admitPath(t, ph, "/v1/chat/completions", chatOK)
	px.Send(replay.ResponseHeaders(400, "content-type", "application/json"))
	pr := px.Send(replay.ResponseBody(up, true))
	if r.GetImmediateResponse().GetDetails() != pr.GetImmediateResponse().GetDetails() {
		t.Errorf("compressed error answered %v, plain one %v", r.GetImmediateResponse(), pr.GetImmediateResponse())
	}
	x.Close()
	px.Close()
}
