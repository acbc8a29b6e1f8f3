package envoy_test

import (
	"testing"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/internal/testkit"
)

// TestBufferedBodyBeforeRequestTrailers: an HTTP/2 request with trailers reaches
// extproc as its BUFFERED body with end_of_stream false (the trailers end the stream;
// ext_proc.cc Filter::onTrailers), then a trailers message only with
// request_trailer_mode SEND. The protocol_config of the first message says the body
// mode is BUFFERED, so the body is whole and the request is served; without it (or
// with STREAMED) a body without end_of_stream is a chunk and is refused as before.
func TestBufferedBodyBeforeRequestTrailers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     filterv3.ProcessingMode_BodySendMode
		config   bool
		trailers bool
		admitted bool
	}{
		{"buffered, trailers skipped", filterv3.ProcessingMode_BUFFERED, true, false, true},
		{"buffered, trailers sent", filterv3.ProcessingMode_BUFFERED, true, true, true},
		{"streamed chunk", filterv3.ProcessingMode_STREAMED, true, false, false},
		{"no protocol_config", filterv3.ProcessingMode_BUFFERED, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			h := replay.Start(t, replay.Service(t, f))
			x := h.Open(t)
			hdr := replay.PostHeaders("/v1/chat/completions", -1, bearer(keyPaid)...)
			if tc.config {
				hdr.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: tc.mode, ResponseBodyMode: filterv3.ProcessingMode_NONE}
			}
			if r := x.Send(hdr); r.GetRequestHeaders() == nil {
				t.Fatalf("headers reply %v", r)
			}
			r := x.Send(replay.RequestBody([]byte(chatOK), false))
			if !tc.admitted {
				checkError(t, r, testkit.WantError(500, "internal_error", "api_error"), false)
				x.Close()
				if len(f.Reserves) != 0 {
					t.Errorf("reserved %v", f.Reserves)
				}
				return
			}
			if hs := setHeaders(t, r.GetRequestBody().GetResponse()); hs["x-gateway-upstream"] != "mock-providers" {
				t.Fatalf("not admitted: %v", r)
			}
			if tc.trailers {
				tr := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
					RequestTrailers: &extprocv3.HttpTrailers{Trailers: replay.Headers("x-checksum", "abc")}}}
				if r := x.Send(tr); r.GetRequestTrailers() == nil {
					t.Fatalf("trailers reply %v", r)
				}
			}
			x.Send(replay.ResponseHeaders(200, "content-type", "application/json", "content-length", "120"))
			x.Send(replay.ResponseBody([]byte(`{"id":"c","model":"mock-gpt","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":500}}`), true))
			x.Close()
			if len(f.Commits) != 1 || f.Commits[0].Actual != 2000 {
				t.Errorf("commits %+v releases %v", f.Commits, f.Releases)
			}
		})
	}
}
