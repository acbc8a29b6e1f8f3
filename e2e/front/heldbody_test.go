package front

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/internal/testkit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestStreamedWholeBodyHeldDuringHeaders: in STREAMED mode, a response body that fully
// arrived while the response-headers reply was awaited goes to ext_proc as one
// end_of_stream message handled like a buffered body: the headers are still held, so
// the reply's header mutation applies and content-length is checked against the
// mutated body (processor_state.cc ProcessorState::handleHeadersResponse).
func TestStreamedWholeBodyHeldDuringHeaders(t *testing.T) {
	const upstreamBody = `{"model":"mock-gpt"}`
	const rewritten = `{"model":"demo-chat-long"}`
	for _, tc := range []struct {
		name       string
		setLength  string
		wantStatus int
		wantBody   string
	}{
		{"header mutation applied", strconv.Itoa(len(rewritten)), 200, rewritten},
		{"content-length checked", strconv.Itoa(len(upstreamBody)), 500, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", strconv.Itoa(len(upstreamBody)))
				_, _ = w.Write([]byte(upstreamBody))
			})
			arrived := make(chan struct{})
			h := newHarness(t, upstream, func(s *session) error {
				s.next()
				_ = s.send(routeTo("mock-providers"))
				s.next() // response_headers
				// Answer only once the whole body is held by the front.
				select {
				case <-arrived:
				case <-time.After(testkit.Deadline):
					return status.Error(codes.Internal, "the body never arrived")
				}
				_ = s.send(responseBodyMode(extprocv3.ProcessingMode_STREAMED))
				m := s.next()
				if rb := m.GetResponseBody(); !rb.GetEndOfStream() || string(rb.GetBody()) != upstreamBody {
					return status.Errorf(codes.Internal, "body message %v", m)
				}
				return s.send(respBodyReply(&extprocsvc.CommonResponse{
					HeaderMutation: &extprocsvc.HeaderMutation{SetHeaders: []*corev3HVO{
						setHeader("content-length", tc.setLength), setHeader("x-rewritten", "yes")}},
					BodyMutation: &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_Body{Body: []byte(rewritten)}},
				}))
			}, nil)
			h.envoy.heldBodyEnded = func() { close(arrived) }
			code, hdr, b := h.do(t, http.MethodGet, "/v1/x", nil, nil)
			if code != tc.wantStatus {
				t.Fatalf("status %d, want %d (%s)", code, tc.wantStatus, b)
			}
			if tc.wantStatus == 200 && (string(b) != tc.wantBody || hdr.Get("x-rewritten") != "yes") {
				t.Errorf("client got %q, x-rewritten %q", b, hdr.Get("x-rewritten"))
			}
			if kinds := messageKinds(h.session(t).log); len(kinds) != 3 {
				t.Errorf("messages %v, want request headers, response headers, one whole body", kinds)
			}
		})
	}
}

// TestBufferedResponseOverTheLimit: a BUFFERED response body over the listener's
// buffer limit is answered by Envoy itself with a 500 (response_payload_too_large,
// which envoy.yaml's local reply mappers turn into our 502 upstream_error); ext_proc
// never sees the body.
func TestBufferedResponseOverTheLimit(t *testing.T) {
	big := strings.Repeat("x", envoyBufferLimit+1)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(big))
	})
	h := newHarness(t, upstream, func(s *session) error {
		s.next()
		_ = s.send(routeTo("mock-providers"))
		s.next()
		_ = s.send(responseBodyMode(extprocv3.ProcessingMode_BUFFERED))
		_, _ = s.waitEnd()
		return nil
	}, nil)
	code, _, b := h.do(t, http.MethodGet, "/v1/x", nil, nil)
	if code != 502 || !strings.Contains(string(b), `"upstream_error"`) {
		t.Errorf("client got %d with %d bytes, want Envoy's local reply: %.300s", code, len(b), b)
	}
	if kinds := messageKinds(h.session(t).log); slices.Contains(kinds, "response_body") {
		t.Errorf("ext_proc saw the body: %v", kinds)
	}
}

// responseBodyMode is a response-headers reply that changes nothing but the response
// body mode.
func responseBodyMode(m extprocv3.ProcessingMode_BodySendMode) *extprocsvc.ProcessingResponse {
	return &extprocsvc.ProcessingResponse{
		Response:     &extprocsvc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocsvc.HeadersResponse{}},
		ModeOverride: &extprocv3.ProcessingMode{RequestBodyMode: extprocv3.ProcessingMode_NONE, ResponseBodyMode: m},
	}
}
