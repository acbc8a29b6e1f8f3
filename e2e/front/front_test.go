package front

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	celv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/llmgw/gateway/e2e/internal/bootstraptest"
	"github.com/llmgw/gateway/internal/testkit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// upstreamRecorder is an upstream that records what reached it and answers JSON.
type upstreamRecorder struct {
	mu     sync.Mutex
	header http.Header
	body   []byte
	host   string
	path   string
	calls  int
}

func (u *upstreamRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.header, u.body, u.host, u.path = r.Header.Clone(), b, r.Host, r.URL.Path
	u.calls++
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
}

func TestRequestHeadersMessageAndImmediateResponse(t *testing.T) {
	h := newHarness(t, nil, func(s *session) error {
		if s.next() == nil {
			return nil
		}
		return s.send(immediate(200, `{"object":"list","data":[]}`, "extproc models list"))
	}, nil)
	req, _ := http.NewRequest(http.MethodGet, h.front.URL+"/v1/models?x=1", nil)
	req.Header.Add("X-Multi", "a")
	req.Header.Add("X-Multi", "b")
	req.Header.Set("Authorization", "Bearer gw-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := h.session(t)
	m := s.log[0]

	// The immediate response passes local_reply_config untouched.
	if resp.StatusCode != 200 || string(body) != `{"object":"list","data":[]}` || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("client got %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	rh := m.GetRequestHeaders()
	if rh == nil || !rh.GetEndOfStream() {
		t.Fatalf("first message %v, want request_headers with end_of_stream", m)
	}
	got := headerMap(rh.GetHeaders())
	for k, want := range map[string]string{":method": "GET", ":path": "/v1/models?x=1", ":scheme": "http", ":authority": h.front.Listener.Addr().String(), "x-forwarded-proto": "http", "authorization": "Bearer gw-secret"} {
		if len(got[k]) != 1 || got[k][0] != want {
			t.Errorf("header %s = %q, want %q", k, got[k], want)
		}
	}
	if strings.Join(got["x-multi"], ",") != "a,b" {
		t.Errorf("x-multi = %q, want two entries", got["x-multi"])
	}
	if len(got["x-request-id"]) != 1 || len(got["x-request-id"][0]) != 36 {
		t.Errorf("x-request-id = %q", got["x-request-id"])
	}
	for _, hv := range rh.GetHeaders().GetHeaders() {
		if hv.GetValue() != "" || strings.ToLower(hv.GetKey()) != hv.GetKey() {
			t.Errorf("header %q: value must be in raw_value, keys lowercase", hv.GetKey())
		}
		if hv.GetKey() == "transfer-encoding" || hv.GetKey() == "content-length" {
			t.Errorf("header %s sent for a GET", hv.GetKey())
		}
	}
	pc := m.GetProtocolConfig()
	if pc == nil || pc.GetRequestBodyMode() != extprocv3.ProcessingMode_BUFFERED || pc.GetResponseBodyMode() != extprocv3.ProcessingMode_NONE {
		t.Errorf("protocol_config = %v", pc)
	}
	if len(m.GetAttributes()) != 0 {
		t.Errorf("attributes sent without configuration: %v", m.GetAttributes())
	}
}

func TestBufferedRequestRoutingAndMutations(t *testing.T) {
	up := &upstreamRecorder{}
	newBody := `{"model":"mock-gpt","messages":[]}`
	h := newHarness(t, up, func(s *session) error {
		s.next() // request_headers
		if err := s.send(routeTo("mock-providers", setHeader("authorization", "Bearer sk-mock-openai"),
			setHeader("x-envoy-from-extproc", "1"), setHeader(":authority", "evil.example"))); err != nil {
			return err
		}
		s.next() // request_body
		if err := s.send(reqBodyReply(&extprocsvc.CommonResponse{
			HeaderMutation: &extprocsvc.HeaderMutation{SetHeaders: []*corev3HVO{setHeader("content-length", strconv.Itoa(len(newBody)))}},
			BodyMutation:   &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_Body{Body: []byte(newBody)}},
		})); err != nil {
			return err
		}
		s.next() // response_headers
		if err := s.send(respHeadersReply(&extprocsvc.CommonResponse{HeaderMutation: &extprocsvc.HeaderMutation{
			SetHeaders: []*corev3HVO{setHeader("x-gateway-cost", "42")}}})); err != nil {
			return err
		}
		_, _ = s.waitEnd()
		return nil
	}, nil)
	status, hdr, body := h.do(t, http.MethodPost, "/v1/chat/completions",
		map[string]string{"Authorization": "Bearer gw-client", "X-Api-Key": "gw-client", "Content-Type": "application/json"},
		strings.NewReader(`{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`))
	s := h.session(t)
	if status != 200 || string(body) != `{"ok":true}` || hdr.Get("X-Gateway-Cost") != "42" {
		t.Fatalf("client got %d %s (cost %q)", status, body, hdr.Get("X-Gateway-Cost"))
	}
	kinds := messageKinds(s.log)
	if strings.Join(kinds, " ") != "request_headers request_body response_headers" {
		t.Errorf("messages %v", kinds)
	}
	if s.log[0].GetRequestHeaders().GetEndOfStream() {
		t.Error("request_headers end_of_stream true with a body")
	}
	if rb := s.log[1].GetRequestBody(); !rb.GetEndOfStream() || !strings.Contains(string(rb.GetBody()), "demo-chat") {
		t.Errorf("request_body = %v", rb)
	}
	if got := headerMap(s.log[2].GetResponseHeaders().GetHeaders()); got[":status"][0] != "200" {
		t.Errorf("response headers %v", got)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if string(up.body) != newBody || up.header.Get("Authorization") != "Bearer sk-mock-openai" || up.header.Get("X-Api-Key") != "" {
		t.Errorf("upstream got body %s auth %q x-api-key %q", up.body, up.header.Get("Authorization"), up.header.Get("X-Api-Key"))
	}
	// mutation_rules: allow_envoy applies x-envoy-* mutations; :authority stays out of reach.
	if up.header.Get("X-Envoy-From-Extproc") != "1" || up.host == "evil.example" {
		t.Errorf("mutations: x-envoy %q (want applied) host %q (want ignored)", up.header.Get("X-Envoy-From-Extproc"), up.host)
	}
}

func messageKinds(log []*extprocsvc.ProcessingRequest) []string {
	var out []string
	for _, m := range log {
		switch {
		case m.GetRequestHeaders() != nil:
			out = append(out, "request_headers")
		case m.GetRequestBody() != nil:
			out = append(out, "request_body")
		case m.GetResponseHeaders() != nil:
			out = append(out, "response_headers")
		case m.GetResponseBody() != nil:
			out = append(out, "response_body")
		default:
			out = append(out, "other")
		}
	}
	return out
}

// continueAll answers every message with "continue", routing to mock-providers.
func continueAll(s *session) error { return continueWithBody(nil)(s) }

// continueWithBody is continueAll with the request body reply's CommonResponse set to cr.
func continueWithBody(cr *extprocsvc.CommonResponse) func(s *session) error {
	return func(s *session) error {
		for {
			m := s.next()
			var r *extprocsvc.ProcessingResponse
			switch {
			case m == nil:
				return nil
			case m.GetRequestHeaders() != nil:
				r = routeTo("mock-providers")
			case m.GetRequestBody() != nil:
				r = reqBodyReply(cr)
			case m.GetResponseHeaders() != nil:
				r = respHeadersReply(nil)
			case m.GetResponseBody() != nil:
				r = respBodyReply(nil)
			}
			if err := s.send(r); err != nil {
				return err
			}
		}
	}
}

// envoyBufferLimit is envoy.yaml's per_connection_buffer_limit_bytes (the API's 2 MiB on
// the client's bytes is extproc's rule, not the front's).
const envoyBufferLimit = 4 << 20

// TestBodyLimitAndChunkedBodies: the front buffers a request body up to the listener's
// buffer limit for ext_proc; one byte more is Envoy's own 413, before ext_proc sees it.
func TestBodyLimitAndChunkedBodies(t *testing.T) {
	up := &upstreamRecorder{}
	h := newHarness(t, up, continueAll, nil)
	tests := []struct {
		name       string
		path       string
		size       int
		chunked    bool
		wantStatus int
		wantCode   string
	}{
		{name: "exactly the limit", path: "/v1/chat/completions", size: envoyBufferLimit, wantStatus: 200},
		{name: "limit + 1", path: "/v1/chat/completions", size: envoyBufferLimit + 1, wantStatus: 413, wantCode: `"code":"request_body_too_large"`},
		{name: "chunked, exactly the limit", path: "/v1/chat/completions", size: envoyBufferLimit, chunked: true, wantStatus: 200},
		{name: "chunked, limit + 1", path: "/v1/chat/completions", size: envoyBufferLimit + 1, chunked: true, wantStatus: 413, wantCode: `"code":"request_body_too_large"`},
		{name: "anthropic envelope", path: "/v1/messages", size: envoyBufferLimit + 1, wantStatus: 413, wantCode: `"type":"request_too_large"`},
		{name: "chunked small", path: "/v1/embeddings", size: 10, chunked: true, wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := bytes.Repeat([]byte("a"), tt.size)
			var body io.Reader = bytes.NewReader(payload)
			if tt.chunked {
				body = io.MultiReader(body) // unknown length: sent chunked
			}
			status, hdr, b := h.do(t, http.MethodPost, tt.path, nil, body)
			s := h.session(t)
			if status != tt.wantStatus || !bytes.Contains(b, []byte(tt.wantCode)) {
				t.Fatalf("got %d %.200s", status, b)
			}
			rh := headerMap(s.log[0].GetRequestHeaders().GetHeaders())
			if _, ok := rh["content-length"]; ok == tt.chunked {
				t.Errorf("content-length present = %v for chunked = %v", ok, tt.chunked)
			}
			if _, ok := rh["transfer-encoding"]; ok {
				t.Error("transfer-encoding sent to ext_proc")
			}
			kinds := messageKinds(s.log)
			if tt.wantStatus == 413 {
				if hdr.Get("X-Should-Retry") != "false" || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
					t.Errorf("413 headers %v", hdr)
				}
				if strings.Join(kinds, " ") != "request_headers response_headers" {
					t.Errorf("messages %v: extproc must never see an over-limit body", kinds)
				}
				return
			}
			if len(kinds) < 2 || kinds[1] != "request_body" || len(s.log[1].GetRequestBody().GetBody()) != tt.size {
				t.Errorf("messages %v", kinds)
			}
		})
	}
}

// TestMutatedBodyBufferLimit: the buffer limit applies to ext_proc's replacement of the
// request body too. A replacement larger than the client's body (and than 2 MiB) but
// within the limit is forwarded whole with the content-length ext_proc set; one over the
// limit is Envoy's 413, and nothing goes upstream.
func TestMutatedBodyBufferLimit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		size       int
		wantStatus int
	}{
		{"grown past the client's size, within the limit", envoyBufferLimit, 200},
		{"grown past the limit", envoyBufferLimit + 1, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &upstreamRecorder{}
			grown := bytes.Repeat([]byte("b"), tc.size)
			h := newHarness(t, up, continueWithBody(&extprocsvc.CommonResponse{
				HeaderMutation: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("content-length", strconv.Itoa(len(grown)))}},
				BodyMutation:   &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_Body{Body: grown}},
			}), nil)
			status, _, b := h.do(t, http.MethodPost, "/v1/chat/completions", nil, bytes.NewReader(bytes.Repeat([]byte("a"), 2<<20)))
			if status != tc.wantStatus {
				t.Fatalf("status %d %.200s", status, b)
			}
			up.mu.Lock()
			defer up.mu.Unlock()
			if tc.wantStatus != 200 {
				if up.calls != 0 || !bytes.Contains(b, []byte(`"code":"request_body_too_large"`)) {
					t.Errorf("%d upstream calls, body %.200s", up.calls, b)
				}
				return
			}
			if !bytes.Equal(up.body, grown) || up.header.Get("Content-Length") != strconv.Itoa(len(grown)) {
				t.Errorf("upstream got %d bytes, content-length %q", len(up.body), up.header.Get("Content-Length"))
			}
		})
	}
}

// geminiPath is an upstream path outside /v1/, as extproc sets it for a Gemini channel.
const geminiPath = "/v1beta/models/m:generateContent?alt=sse"

func TestRouting(t *testing.T) {
	up := &upstreamRecorder{}
	tests := []struct {
		name       string
		reply      *extprocsvc.ProcessingResponse
		path       string
		client     map[string]string
		wantStatus int
		wantCode   string
		wantCalls  int
		// v1Only narrows envoy.yaml's route to prefix /v1/; wantPath is the path the
		// upstream got.
		v1Only   bool
		wantPath string
	}{
		{name: "header with clear_route_cache routes", reply: routeTo("mock-providers"), path: "/v1/embeddings", wantStatus: 200, wantCalls: 1},
		{name: "header without clear_route_cache does not reroute",
			reply: reqHeadersReply(&extprocsvc.CommonResponse{HeaderMutation: &extprocsvc.HeaderMutation{
				SetHeaders: []*corev3HVO{setHeader("x-gateway-upstream", "mock-providers")}}}),
			path: "/v1/embeddings", wantStatus: 503, wantCode: `"code":"service_unavailable"`},
		{name: "clear_route_cache without header_mutation is ignored",
			reply:  reqHeadersReply(&extprocsvc.CommonResponse{ClearRouteCache: true}),
			client: map[string]string{"X-Gateway-Upstream": "nope"},
			path:   "/v1/embeddings", wantStatus: 503, wantCode: `"code":"service_unavailable"`},
		{name: "unknown cluster", reply: routeTo("no-such-cluster"), path: "/v1/embeddings", wantStatus: 503, wantCode: `"code":"service_unavailable"`},
		{name: "unknown cluster on messages", reply: routeTo("no-such-cluster"), path: "/v1/messages", wantStatus: 503, wantCode: `"type":"overloaded_error"`},
		{name: "no route", reply: routeTo("mock-providers"), path: "/other", v1Only: true, wantStatus: 404, wantCode: `"code":"not_found"`},
		// Envoy matches the route again on the headers as extproc left them, :path
		// included (refreshCachedRoute after clearRouteCache), and forwards that path.
		{name: "a new :path is routed and forwarded", reply: routeTo("mock-providers", setHeader(":path", geminiPath)),
			path: "/v1/chat/completions", wantStatus: 200, wantCalls: 1, wantPath: "/v1beta/models/m:generateContent"},
		{name: "a new :path no route matches", reply: routeTo("mock-providers", setHeader(":path", geminiPath)),
			path: "/v1/chat/completions", v1Only: true, wantStatus: 404, wantCode: `"code":"not_found"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up.mu.Lock()
			up.calls = 0
			up.mu.Unlock()
			h := newHarness(t, up, func(s *session) error {
				s.next()
				if err := s.send(tt.reply); err != nil {
					return err
				}
				for m := s.next(); m != nil; m = s.next() {
					if err := s.send(respHeadersReply(nil)); err != nil {
						return err
					}
				}
				return nil
			}, func(b *bootstraptest.Bootstrap) {
				if tt.v1Only {
					b.Route(func(r *routev3.Route) {
						r.Match.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/v1/"}
					})
				}
			})
			status, _, b := h.do(t, http.MethodGet, tt.path, tt.client, nil)
			if status != tt.wantStatus || !bytes.Contains(b, []byte(tt.wantCode)) {
				t.Errorf("got %d %s", status, b)
			}
			up.mu.Lock()
			defer up.mu.Unlock()
			if up.calls != tt.wantCalls {
				t.Errorf("upstream called %d times, want %d", up.calls, tt.wantCalls)
			}
			if tt.wantPath != "" && up.path != tt.wantPath {
				t.Errorf("upstream path %q, want %q", up.path, tt.wantPath)
			}
		})
	}
}

func TestContentLengthMismatch(t *testing.T) {
	up := &upstreamRecorder{}
	h := newHarness(t, up, func(s *session) error {
		s.next()
		_ = s.send(routeTo("mock-providers"))
		s.next()
		return s.send(reqBodyReply(&extprocsvc.CommonResponse{
			BodyMutation: &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_Body{Body: []byte(`{"longer":"body than before"}`)}},
		}))
	}, nil)
	status, hdr, b := h.do(t, http.MethodPost, "/v1/chat/completions", nil, strings.NewReader(`{"a":1}`))
	if status != 500 || !bytes.Contains(b, []byte(`"code":"internal_error"`)) || hdr.Get("X-Should-Retry") != "false" {
		t.Errorf("got %d %s", status, b)
	}
	if up.calls != 0 {
		t.Error("request reached the upstream")
	}
}

func TestStreamedResponsePipelinedAndFlushed(t *testing.T) {
	gotChunk1 := make(chan struct{})
	clientGotA := make(chan struct{})
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", "10") // stale: ext_proc must remove it
		rc := http.NewResponseController(w)
		_, _ = w.Write([]byte("chunk1"))
		_ = rc.Flush()
		select {
		case <-gotChunk1:
		case <-time.After(testkit.Deadline):
			return
		}
		_, _ = w.Write([]byte("ch2\n"))
		_ = rc.Flush()
		// Hold the end until the client saw the first rewritten chunk: proves flushing.
		select {
		case <-clientGotA:
		case <-time.After(testkit.Deadline):
		}
	})
	h := newHarness(t, upstream, func(s *session) error {
		s.next()
		_ = s.send(routeTo("mock-providers"))
		s.next() // response_headers
		_ = s.send(&extprocsvc.ProcessingResponse{
			Response: &extprocsvc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocsvc.HeadersResponse{
				Response: &extprocsvc.CommonResponse{HeaderMutation: &extprocsvc.HeaderMutation{RemoveHeaders: []string{"content-length"}}}}},
			ModeOverride: &extprocv3.ProcessingMode{RequestBodyMode: extprocv3.ProcessingMode_NONE, ResponseBodyMode: extprocv3.ProcessingMode_STREAMED},
		})
		m1 := s.next()
		if string(m1.GetResponseBody().GetBody()) != "chunk1" {
			return status.Errorf(codes.Internal, "first chunk %v", m1)
		}
		close(gotChunk1)
		// Pipelining: the second chunk arrives although the first is unanswered.
		m2 := s.next()
		if string(m2.GetResponseBody().GetBody()) != "ch2\n" {
			return status.Errorf(codes.Internal, "second chunk %v", m2)
		}
		for _, out := range []string{"A\n", "B\n"} {
			_ = s.send(respBodyReply(&extprocsvc.CommonResponse{BodyMutation: &extprocsvc.BodyMutation{
				Mutation: &extprocsvc.BodyMutation_Body{Body: []byte(out)}}}))
		}
		m3 := s.next()
		if !m3.GetResponseBody().GetEndOfStream() {
			return status.Errorf(codes.Internal, "final message %v", m3)
		}
		return s.send(respBodyReply(&extprocsvc.CommonResponse{BodyMutation: &extprocsvc.BodyMutation{
			Mutation: &extprocsvc.BodyMutation_Body{Body: []byte("[END]\n")}}}))
	}, nil)

	resp, err := http.Get(h.front.URL + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ContentLength != -1 {
		t.Errorf("content-length %d survived", resp.ContentLength)
	}
	br := bufio.NewReader(resp.Body)
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			lines = append(lines, line)
			if line == "A\n" {
				close(clientGotA)
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
	}
	if strings.Join(lines, "") != "A\nB\n[END]\n" {
		t.Errorf("client got %q", lines)
	}
	s := h.session(t)
	if kinds := messageKinds(s.log); len(kinds) != 5 {
		t.Errorf("messages %v", kinds)
	}
}

func TestBufferedResponseOverride(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"model":"mock-gpt"}`))
	})
	rewritten := `{"model":"demo-chat"}`
	h := newHarness(t, upstream, func(s *session) error {
		s.next()
		_ = s.send(routeTo("mock-providers"))
		s.next()
		_ = s.send(responseBodyMode(extprocv3.ProcessingMode_BUFFERED))
		m := s.next()
		if rb := m.GetResponseBody(); !rb.GetEndOfStream() || string(rb.GetBody()) != `{"model":"mock-gpt"}` {
			return status.Errorf(codes.Internal, "body message %v", m)
		}
		return s.send(respBodyReply(&extprocsvc.CommonResponse{
			HeaderMutation: &extprocsvc.HeaderMutation{SetHeaders: []*corev3HVO{setHeader("content-length", strconv.Itoa(len(rewritten)))}},
			BodyMutation:   &extprocsvc.BodyMutation{Mutation: &extprocsvc.BodyMutation_Body{Body: []byte(rewritten)}},
		}))
	}, nil)
	status, _, b := h.do(t, http.MethodGet, "/v1/x", nil, nil)
	if status != 200 || string(b) != rewritten {
		t.Errorf("got %d %s", status, b)
	}
}

func TestImmediateResponseInEachPhase(t *testing.T) {
	sse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: 1\n\n"))
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	})
	deny := immediate(402, `{"error":{"code":"insufficient_credits"}}`, "extproc_insufficient_credits")
	tests := []struct {
		name  string
		phase string // the message answered with the immediate response
		mode  extprocv3.ProcessingMode_BodySendMode
		reset bool
	}{
		{name: "request headers", phase: "request_headers"},
		{name: "request body", phase: "request_body"},
		{name: "response headers", phase: "response_headers"},
		{name: "buffered response body", phase: "response_body", mode: extprocv3.ProcessingMode_BUFFERED},
		{name: "streamed response body resets", phase: "response_body", mode: extprocv3.ProcessingMode_STREAMED, reset: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := http.Handler(&upstreamRecorder{})
			if tt.mode == extprocv3.ProcessingMode_STREAMED {
				up = sse
			}
			h := newHarness(t, up, func(s *session) error {
				for m := s.next(); m != nil; m = s.next() {
					kind := messageKinds([]*extprocsvc.ProcessingRequest{m})[0]
					if kind == tt.phase {
						return s.send(deny)
					}
					var r *extprocsvc.ProcessingResponse
					switch kind {
					case "request_headers":
						r = routeTo("mock-providers")
					case "request_body":
						r = reqBodyReply(nil)
					case "response_headers":
						r = &extprocsvc.ProcessingResponse{
							Response:     &extprocsvc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocsvc.HeadersResponse{}},
							ModeOverride: &extprocv3.ProcessingMode{ResponseBodyMode: tt.mode},
						}
					}
					if err := s.send(r); err != nil {
						return err
					}
				}
				return nil
			}, nil)
			resp, err := http.Post(h.front.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if tt.reset {
				if err == nil {
					t.Errorf("stream ended cleanly (%d %s), want a reset", resp.StatusCode, b)
				}
				return
			}
			if err != nil || resp.StatusCode != 402 || string(b) != `{"error":{"code":"insufficient_credits"}}` ||
				resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("got %d %q %s (%v)", resp.StatusCode, resp.Header.Get("Content-Type"), b, err)
			}
		})
	}
}

func TestClientDisconnectCancelsStream(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for {
			if _, err := w.Write([]byte("data: tick\n\n")); err != nil {
				return
			}
			_ = rc.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	ended := make(chan []*extprocsvc.ProcessingRequest, 1)
	h := newHarness(t, upstream, func(s *session) error {
		s.next()
		_ = s.send(routeTo("mock-providers"))
		s.next()
		_ = s.send(&extprocsvc.ProcessingResponse{
			Response:     &extprocsvc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocsvc.HeadersResponse{}},
			ModeOverride: &extprocv3.ProcessingMode{ResponseBodyMode: extprocv3.ProcessingMode_STREAMED},
		})
		// Answer chunks until the stream ends, collecting everything seen.
		for m := s.next(); m != nil; m = s.next() {
			if err := s.send(respBodyReply(nil)); err != nil {
				break
			}
		}
		ended <- s.log
		return nil
	}, nil)
	resp, err := http.Get(h.front.URL + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // the client goes away mid-stream
	select {
	case log := <-ended:
		for _, m := range log {
			if m.GetResponseBody().GetEndOfStream() {
				t.Error("end_of_stream sent after the client disconnected")
			}
		}
	case <-time.After(testkit.Deadline):
		t.Fatal("ext_proc stream not cancelled")
	}
}

func TestExtProcFailures(t *testing.T) {
	tests := []struct {
		name     string
		handler  func(s *session) error
		edit     bootstrapEdit
		path     string
		wantCode string
	}{
		{name: "gRPC error", handler: func(s *session) error {
			s.next()
			return status.Error(codes.Unavailable, "down")
		}, path: "/v1/chat/completions", wantCode: `"code":"internal_error"`},
		{name: "gRPC error on messages", handler: func(s *session) error {
			s.next()
			return status.Error(codes.Internal, "boom")
		}, path: "/v1/messages", wantCode: `"type":"api_error"`},
		{name: "message timeout", handler: func(s *session) error {
			s.next()
			_, _ = s.waitEnd()
			return nil
		}, edit: messageTimeout(50 * time.Millisecond),
			path: "/v1/chat/completions", wantCode: `"code":"internal_error"`},
		{name: "spurious reply", handler: func(s *session) error {
			s.next()
			return s.send(respBodyReply(nil))
		}, path: "/v1/chat/completions", wantCode: `"code":"internal_error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &upstreamRecorder{}, tt.handler, tt.edit)
			status, hdr, b := h.do(t, http.MethodGet, tt.path, nil, nil)
			if status != 500 || !bytes.Contains(b, []byte(tt.wantCode)) || hdr.Get("X-Should-Retry") != "false" {
				t.Errorf("got %d %s", status, b)
			}
		})
	}
}

func TestServerCloseContinuesWithoutExtProc(t *testing.T) {
	up := &upstreamRecorder{}
	h := newHarness(t, up, func(s *session) error {
		s.next()
		return s.send(routeTo("mock-providers")) // then close the stream with OK
	}, nil)
	status, _, b := h.do(t, http.MethodGet, "/v1/x", nil, nil)
	if status != 200 || string(b) != `{"ok":true}` {
		t.Errorf("got %d %s", status, b)
	}
}

func TestUpstreamConnectFailure(t *testing.T) {
	var seen []string
	h := newHarness(t, nil, func(s *session) error {
		s.next()
		_ = s.send(routeTo("mock-providers"))
		m := s.next()
		if m != nil {
			seen = headerMap(m.GetResponseHeaders().GetHeaders())[":status"]
		}
		return s.send(respHeadersReply(nil))
	}, nil)
	h.upstream.Close() // nothing listens on the mock cluster's port now
	status, _, b := h.do(t, http.MethodGet, "/v1/chat/completions", nil, nil)
	// No channel could be reached: 503 service_unavailable (spec), not an unusable answer.
	if status != 503 || !bytes.Contains(b, []byte(`"code":"service_unavailable"`)) {
		t.Errorf("got %d %s", status, b)
	}
	// Envoy applies local_reply_config before the encoder filters: ext_proc sees the
	// mapped status of the router's local reply.
	if strings.Join(seen, "") != "503" {
		t.Errorf("ext_proc saw :status %v", seen)
	}
}

func TestOverrideMessageTimeout(t *testing.T) {
	h := newHarness(t, &upstreamRecorder{}, func(s *session) error {
		s.next()
		if err := s.send(&extprocsvc.ProcessingResponse{OverrideMessageTimeout: durationpb.New(5 * time.Second)}); err != nil {
			return err
		}
		// Answer after the configured 50 ms timeout, within the extension.
		time.Sleep(200 * time.Millisecond)
		return s.send(immediate(200, "late but fine", "extproc_test"))
	}, messageTimeout(50*time.Millisecond))
	status, _, b := h.do(t, http.MethodGet, "/v1/x", nil, nil)
	if status != 200 || string(b) != "late but fine" {
		t.Errorf("got %d %s", status, b)
	}
}

func TestConfigRefusesUnemulatedSettings(t *testing.T) {
	orig := loadBootstrap(t)
	extProc := func(edit func(*extprocv3.ExternalProcessor)) bootstrapEdit {
		return func(b *bootstraptest.Bootstrap) { b.ExtProc(edit) }
	}
	hcm := func(edit func(*hcmv3.HttpConnectionManager)) bootstrapEdit {
		return func(b *bootstraptest.Bootstrap) { b.HCM(edit) }
	}
	// accessLogField sets one field of the access log's JSON format.
	accessLogField := func(name, value string) bootstrapEdit {
		return accessLog(func(l *streamv3.StdoutAccessLog) {
			l.GetLogFormat().GetJsonFormat().GetFields()[name] = structpb.NewStringValue(value)
		})
	}
	tests := []struct {
		name string
		edit bootstrapEdit
		want string
	}{
		{name: "request attributes", edit: extProc(func(ep *extprocv3.ExternalProcessor) { ep.RequestAttributes = []string{"request.path"} }), want: "request_attributes"},
		{name: "failure mode allow", edit: extProc(func(ep *extprocv3.ExternalProcessor) { ep.FailureModeAllow = true }), want: "failure_mode_allow"},
		{name: "regex route", edit: func(b *bootstraptest.Bootstrap) {
			b.Route(func(r *routev3.Route) {
				r.Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/v1/.*"}}
			})
		}, want: "safe_regex"},
		{name: "trailers", edit: extProc(func(ep *extprocv3.ExternalProcessor) {
			ep.ProcessingMode.RequestTrailerMode = extprocv3.ProcessingMode_SEND
		}), want: "trailer"},
		{name: "streamed request body", edit: extProc(func(ep *extprocv3.ExternalProcessor) {
			ep.ProcessingMode.RequestBodyMode = extprocv3.ProcessingMode_STREAMED
		}), want: "request_body_mode"},
		{name: "unknown CEL", edit: mapperExpression("response.code_details == 'request_payload_too_large'", "response.flags == 1"), want: "CEL"},
		{name: "top-level body_format", edit: hcm(func(h *hcmv3.HttpConnectionManager) {
			h.LocalReplyConfig.BodyFormat = &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{
				TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "x"}}}}
		}), want: "body_format"},
		{name: "access log operator", edit: accessLogField("status", "%RESPONSE_FLAGS%"), want: "RESPONSE_FLAGS"},
		{name: "access log text around an operator", edit: accessLogField("status", "code %RESPONSE_CODE%"), want: "exactly one command operator"},
		{name: "access log truncation", edit: accessLogField("method", "%REQ(:METHOD):3%"), want: "exactly one command operator"},
		{name: "access log alternative header", edit: accessLogField("request_id", "%REQ(X-REQUEST-ID?X-OTHER)%"), want: "REQ"},
		{name: "access log start time format", edit: accessLogField("start_time", "%START_TIME(%s)%"), want: "START_TIME"},
		{name: "access log omit_empty_values", edit: accessLog(func(l *streamv3.StdoutAccessLog) { l.GetLogFormat().OmitEmptyValues = true }), want: "omit_empty_values"},
		{name: "access log filter", edit: hcm(func(h *hcmv3.HttpConnectionManager) {
			h.AccessLog[0].Filter = &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_NotHealthCheckFilter{NotHealthCheckFilter: &accesslogv3.NotHealthCheckFilter{}}}
		}), want: "filter"},
		{name: "typed metadata namespaces", edit: extProc(func(ep *extprocv3.ExternalProcessor) {
			ep.MetadataOptions.ReceivingNamespaces = &extprocv3.MetadataOptions_MetadataNamespaces{Typed: []string{"llmgw"}}
		}), want: "typed"},
		{name: "internal_address_config without ranges", edit: hcm(func(h *hcmv3.HttpConnectionManager) {
			h.InternalAddressConfig = &hcmv3.HttpConnectionManager_InternalAddressConfig{UnixSockets: false}
		}), want: "internal_address_config without cidr_ranges"},
		{name: "internal_address_config unix sockets", edit: hcm(func(h *hcmv3.HttpConnectionManager) { h.InternalAddressConfig.UnixSockets = true }), want: "unix_sockets"},
		{name: "skip_xff_append", edit: hcm(func(h *hcmv3.HttpConnectionManager) { h.SkipXffAppend = true }), want: "skip_xff_append"},
		{name: "preserve_external_request_id", edit: hcm(func(h *hcmv3.HttpConnectionManager) { h.PreserveExternalRequestId = true }), want: "preserve_external_request_id"},
		{name: "mutation_rules disallow_is_error", edit: extProc(func(ep *extprocv3.ExternalProcessor) {
			ep.MutationRules.DisallowIsError = wrapperspb.Bool(true)
		}), want: "disallow_is_error"},
		{name: "mutation_rules allow_expression", edit: extProc(func(ep *extprocv3.ExternalProcessor) {
			ep.MutationRules.AllowExpression = &matcherv3.RegexMatcher{Regex: "x-.*"}
		}), want: "allow_expression"},
		{name: "generate_request_id", edit: hcm(func(h *hcmv3.HttpConnectionManager) { h.GenerateRequestId = wrapperspb.Bool(false) }), want: "generate_request_id"},
		{name: "overload action not emulated", edit: func(b *bootstraptest.Bootstrap) {
			b.OverloadAction("envoy.overload_actions.shrink_heap").Name = "envoy.overload_actions.disable_http_keepalive"
		}, want: "disable_http_keepalive"},
		{name: "overload trigger on connections", edit: func(b *bootstraptest.Bootstrap) {
			a := b.OverloadAction("envoy.overload_actions.shrink_heap")
			a.Triggers = append(a.Triggers, &overloadv3.Trigger{Name: "envoy.resource_monitors.global_downstream_max_connections",
				TriggerOneof: &overloadv3.Trigger_Threshold{Threshold: &overloadv3.ThresholdTrigger{Value: 0.5}}})
		}, want: "exactly one trigger"},
		{name: "overload scaled trigger", edit: func(b *bootstraptest.Bootstrap) {
			b.OverloadAction("envoy.overload_actions.stop_accepting_requests").Triggers[0].TriggerOneof = &overloadv3.Trigger_Scaled{
				Scaled: &overloadv3.ScaledTrigger{ScalingThreshold: 0.8, SaturationThreshold: 0.95}}
		}, want: "scaled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := orig.Clone()
			tt.edit(b)
			if b.Equal(orig) {
				t.Fatal("edit changed nothing")
			}
			_, err := FromBootstrap(b.Parsed())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one naming %s", err, tt.want)
			}
		})
	}
	t.Run("envoy.yaml itself", func(t *testing.T) {
		if _, err := FromBootstrap(orig.Parsed()); err != nil {
			t.Fatal(err)
		}
	})
}

// messageTimeout sets the ext_proc filter's message_timeout.
func messageTimeout(d time.Duration) bootstrapEdit {
	return func(b *bootstraptest.Bootstrap) {
		b.ExtProc(func(ep *extprocv3.ExternalProcessor) { ep.MessageTimeout = durationpb.New(d) })
	}
}

// accessLog edits the connection manager's single (stdout) access log.
func accessLog(edit func(*streamv3.StdoutAccessLog)) bootstrapEdit {
	return func(b *bootstraptest.Bootstrap) {
		b.HCM(func(h *hcmv3.HttpConnectionManager) {
			if len(h.GetAccessLog()) != 1 {
				b.TB().Fatalf("connection manager has %d access logs, want 1", len(h.GetAccessLog()))
			}
			bootstraptest.EditAny(b.TB(), h.GetAccessLog()[0].GetTypedConfig(), edit)
		})
	}
}

// mapperExpression replaces the CEL expression old of a local reply mapper by expr.
func mapperExpression(old, expr string) bootstrapEdit {
	return func(b *bootstraptest.Bootstrap) {
		b.HCM(func(h *hcmv3.HttpConnectionManager) {
			for _, m := range h.GetLocalReplyConfig().GetMappers() {
				found := false
				bootstraptest.EditAny(b.TB(), m.GetFilter().GetExtensionFilter().GetTypedConfig(), func(e *celv3.ExpressionFilter) {
					if found = e.GetExpression() == old; found {
						e.Expression = expr
					}
				})
				if found {
					return
				}
			}
			b.TB().Fatalf("no local reply mapper with expression %q", old)
		})
	}
}

func TestLocalReplyMappersOfEnvoyYAML(t *testing.T) {
	cfg, err := FromBootstrap(loadBootstrap(t).Parsed())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, details string
		code                int
		wantStatus          int
		wantCode            string
		anthropic           bool
	}{
		{name: "extproc reply untouched", path: "/v1/chat/completions", details: "extproc_rate_limited", code: 429, wantStatus: 429},
		{name: "extproc 5xx untouched", path: "/v1/messages", details: "extproc_upstream_error", code: 502, wantStatus: 502},
		{name: "413", path: "/v1/chat/completions", details: "request_payload_too_large", code: 413, wantStatus: 413, wantCode: "request_body_too_large"},
		{name: "413 anthropic", path: "/v1/messages/count_tokens", details: "request_payload_too_large", code: 413, wantStatus: 413, wantCode: "request_body_too_large", anthropic: true},
		{name: "no healthy upstream", path: "/v1/embeddings", details: "no_healthy_upstream", code: 503, wantStatus: 503, wantCode: "service_unavailable"},
		{name: "connect failure", path: "/v1/responses", details: detailsConnectFailure, code: 503, wantStatus: 503, wantCode: "service_unavailable"},
		{name: "connect failure on messages", path: "/v1/messages", details: detailsConnectFailure, code: 503, wantStatus: 503, wantCode: "service_unavailable", anthropic: true},
		{name: "upstream timeout", path: "/v1/responses", details: "upstream_response_timeout", code: 504, wantStatus: 502, wantCode: "upstream_error"},
		{name: "ext_proc grpc error", path: "/v1/chat/completions", details: "ext_proc_error_gRPC_error_14", code: 500, wantStatus: 500, wantCode: "internal_error"},
		{name: "ext_proc timeout", path: "/v1/messages", details: detailsMessageTimeout, code: 504, wantStatus: 500, wantCode: "internal_error", anthropic: true},
		{name: "codec error", path: "/v1/x", details: "http1.codec_error", code: 400, wantStatus: 400, wantCode: "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := buildLocalReply(cfg.LocalReply, tt.path, tt.code, "orig", tt.details, nil)
			if lr.status != tt.wantStatus {
				t.Errorf("status %d, want %d", lr.status, tt.wantStatus)
			}
			if tt.wantCode == "" {
				ct, _ := lr.headers.get("content-type")
				if string(lr.body) != "orig" || ct != "text/plain" {
					t.Errorf("rewritten: %s (%s)", lr.body, ct)
				}
				return
			}
			var env struct {
				Type  string `json:"type"`
				Error struct {
					Type, Code, Message, DocURL string
					Retryable                   *bool           `json:"retryable"`
					Param                       json.RawMessage `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(lr.body, &env); err != nil {
				t.Fatalf("%v: %s", err, lr.body)
			}
			if env.Error.Code != tt.wantCode || env.Error.Message == "" {
				t.Errorf("body %s", lr.body)
			}
			if tt.anthropic != (env.Type == "error") || (!tt.anthropic && (env.Error.Retryable == nil || env.Error.Param != nil)) {
				t.Errorf("wrong envelope: %s", lr.body)
			}
			if v, _ := lr.headers.get("x-should-retry"); v != "false" {
				t.Errorf("x-should-retry %q", v)
			}
		})
	}
}

// TestMalformedMutationAnswers500: a header value with a newline in the response-headers
// reply fails the request with Envoy's 500 (its details in the access log), never
// passing the upstream's answer on without the header.
func TestMalformedMutationAnswers500(t *testing.T) {
	up := &upstreamRecorder{}
	h := newHarness(t, up, func(s *session) error {
		err := routedUntilResponseHeaders(s, respHeadersReply(&extprocsvc.CommonResponse{HeaderMutation: &extprocsvc.HeaderMutation{
			SetHeaders: []*corev3HVO{setHeader("x-gateway-cost", "42\nx-injected: 1")}}}))
		_, _ = s.waitEnd()
		return err
	}, nil)
	status, hdr, body := h.do(t, http.MethodPost, "/v1/chat/completions",
		map[string]string{"Content-Type": "application/json"}, strings.NewReader(`{"model":"demo-chat"}`))
	if status != 500 || strings.Contains(string(body), `"ok"`) || hdr.Get("X-Gateway-Cost") != "" || hdr.Get("X-Injected") != "" {
		t.Fatalf("client got %d %q %v", status, body, hdr)
	}
}

// TestNoneModeClosesStreamAfterHeadersReply: with response body mode NONE, Envoy 1.37+
// ends the ext_proc stream right after the response-headers reply, while the body is
// still to come: the upstream here holds its body back until the stream has ended.
func TestNoneModeClosesStreamAfterHeadersReply(t *testing.T) {
	ended := make(chan struct{})
	var endedFirst atomic.Bool
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("content-type", "audio/mpeg")
		w.WriteHeader(200)
		http.NewResponseController(w).Flush()
		select {
		case <-ended:
			endedFirst.Store(true)
		case <-time.After(testkit.Deadline):
		}
		_, _ = w.Write([]byte("ID3 audio"))
	})
	h := newHarness(t, up, func(s *session) error {
		if err := routedUntilResponseHeaders(s, respHeadersReply(nil)); err != nil {
			return err
		}
		if _, err := s.waitEnd(); err == nil || err.Error() != "stream did not end" {
			close(ended)
		}
		return nil
	}, nil)
	status, _, body := h.do(t, http.MethodPost, "/v1/audio/speech",
		map[string]string{"Content-Type": "application/json"}, strings.NewReader(`{"model":"demo-tts"}`))
	if status != 200 || string(body) != "ID3 audio" {
		t.Fatalf("client got %d %q", status, body)
	}
	if !endedFirst.Load() {
		t.Error("the ext_proc stream stayed open while the NONE-mode body passed")
	}
}

// routedUntilResponseHeaders plays extproc up to the response headers: routes the
// request, passes its body, and answers the response headers with reply.
func routedUntilResponseHeaders(s *session, reply *extprocsvc.ProcessingResponse) error {
	s.next() // request_headers
	if err := s.send(routeTo("mock-providers")); err != nil {
		return err
	}
	s.next() // request_body
	if err := s.send(reqBodyReply(nil)); err != nil {
		return err
	}
	s.next() // response_headers
	return s.send(reply)
}
