package front

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// billingProc answers like extproc does for a non-streamed chat request: route with
// the provider credential, buffer the response body, and report the request's facts as
// dynamic metadata on every reply.
func billingProc(s *session) error {
	facts, err := structpb.NewStruct(map[string]any{"llmgw": map[string]any{
		"endpoint": "chat", "model": "demo-chat", "channel": "mock-demo-chat", "hold_micros": 4096,
	}})
	if err != nil {
		return err
	}
	for m := s.next(); m != nil; m = s.next() {
		var r *extprocsvc.ProcessingResponse
		switch {
		case m.GetRequestHeaders() != nil:
			r = routeTo("mock-providers", setHeader("authorization", "Bearer sk-mock-openai"))
		case m.GetRequestBody() != nil:
			r = reqBodyReply(nil)
		case m.GetResponseHeaders() != nil:
			r = respHeadersReply(nil)
			r.ModeOverride = &extprocv3.ProcessingMode{RequestBodyMode: extprocv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocv3.ProcessingMode_BUFFERED}
		case m.GetResponseBody() != nil:
			r = respBodyReply(nil)
		}
		r.DynamicMetadata = facts
		if err := s.send(r); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkChatRequest is one non-streamed chat request through the front, as the load
// tool sends them: four ext_proc messages, one upstream attempt, one access log line.
func BenchmarkChatRequest(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"load test load test"}}],"usage":{"prompt_tokens":9,"completion_tokens":8}}`)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		_, _ = w.Write(answer)
	})
	h := newHarness(b, upstream, billingProc, nil)
	h.envoy.accessLog = &accessLogWriter{w: io.Discard}
	go func() {
		for range h.proc.sessions {
		}
	}()
	body := []byte(`{"model":"demo-chat","max_tokens":16,"messages":[{"role":"user","content":"load test 1 [[mock:tokens=8]]"}]}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", h.front.URL+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer gw-key")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}
