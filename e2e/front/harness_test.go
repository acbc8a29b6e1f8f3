package front

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/llmgw/gateway/e2e/internal/bootstraptest"
	"github.com/llmgw/gateway/internal/testkit"
)

// fakeProc is a scripted ext_proc server: each stream is handed to the test's handler,
// which reads the messages the front sends and writes replies.
type fakeProc struct {
	extprocsvc.UnimplementedExternalProcessorServer
	handler  func(s *session) error
	sessions chan *session
}

var _ extprocsvc.ExternalProcessorServer = (*fakeProc)(nil)

// session is one ext_proc stream seen by the fake.
type session struct {
	stream extprocsvc.ExternalProcessor_ProcessServer
	msgs   chan *extprocsvc.ProcessingRequest
	// end receives the stream's terminal Recv error (io.EOF or a status error).
	end chan error
	// log is every message received, in order (filled by next).
	log []*extprocsvc.ProcessingRequest
}

func (f *fakeProc) Process(stream extprocsvc.ExternalProcessor_ProcessServer) error {
	s := &session{stream: stream, msgs: make(chan *extprocsvc.ProcessingRequest, 64), end: make(chan error, 1)}
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				s.end <- err
				close(s.msgs)
				return
			}
			s.msgs <- m
		}
	}()
	select {
	case f.sessions <- s:
	default:
	}
	return f.handler(s)
}

// next returns the next message, failing the test if none arrives in time.
func (s *session) next() *extprocsvc.ProcessingRequest {
	select {
	case m, ok := <-s.msgs:
		if !ok {
			return nil
		}
		s.log = append(s.log, m)
		return m
	case <-time.After(testkit.Deadline):
		return nil
	}
}

// waitEnd waits for the stream to end and returns whether any message was still
// pending (and its kind).
func (s *session) waitEnd() ([]*extprocsvc.ProcessingRequest, error) {
	var rest []*extprocsvc.ProcessingRequest
	for m := range s.msgs {
		rest = append(rest, m)
	}
	select {
	case err := <-s.end:
		return rest, err
	case <-time.After(testkit.Deadline):
		return rest, errors.New("stream did not end")
	}
}

func (s *session) send(r *extprocsvc.ProcessingResponse) error { return s.stream.Send(r) }

// harness is a front wired to a fake ext_proc server and an upstream test server.
type harness struct {
	// envoy is the Front the server serves.
	envoy    *Front
	front    *httptest.Server
	proc     *fakeProc
	upstream *httptest.Server
	// cds serves the dynamic clusters: mock-providers on upstream, and more.
	cds *cdsServer
}

// bootstrapEdit changes the parsed envoy/envoy.yaml before a test's front reads it.
type bootstrapEdit = func(*bootstraptest.Bootstrap)

// newHarness loads envoy/envoy.yaml with edit applied (nil: unchanged), pointing its
// extproc cluster at the fake, whose xDS side serves the mock-providers cluster on the
// fake upstream.
func newHarness(t testing.TB, upstream http.Handler, handler func(s *session) error, edit bootstrapEdit) *harness {
	t.Helper()
	return newHarnessClusters(t, upstream, handler, edit)
}

// newHarnessClusters is newHarness with more clusters served over CDS.
func newHarnessClusters(t testing.TB, upstream http.Handler, handler func(s *session) error, edit bootstrapEdit, more ...*clusterv3.Cluster) *harness {
	t.Helper()
	h := &harness{proc: &fakeProc{handler: handler, sessions: make(chan *session, 16)}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(8 << 20)) // a body at the buffer limit, as extproc takes it
	extprocsvc.RegisterExternalProcessorServer(gs, h.proc)
	h.cds = newCDSServer(gs)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	if upstream == nil {
		upstream = http.NotFoundHandler()
	}
	h.upstream = httptest.NewServer(upstream)
	t.Cleanup(h.upstream.Close)
	mock := testCluster("mock-providers", h.upstream.Listener.Addr().String())
	for _, c := range more {
		if c.GetName() == mock.GetName() {
			// The test's own mock-providers (its address is set here).
			c.LoadAssignment = mock.GetLoadAssignment()
			mock = nil
		}
	}
	if mock != nil {
		more = append([]*clusterv3.Cluster{mock}, more...)
	}
	h.cds.set(t, more...)

	b := loadBootstrap(t)
	b.ClusterAddress("extproc", ln.Addr().String())
	if edit != nil {
		edit(b)
	}
	cfg, err := FromBootstrap(b.Parsed())
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	f.WaitClusters()
	h.envoy = f
	h.front = httptest.NewUnstartedServer(f)
	h.front.Config.Protocols = new(http.Protocols)
	h.front.Config.Protocols.SetHTTP1(true)
	h.front.Config.Protocols.SetUnencryptedHTTP2(true) // as Start serves
	h.front.Config.HTTP2 = cfg.ServerHTTP2()
	h.front.Listener = f.Listen(h.front.Listener)
	h.front.Start()
	t.Cleanup(h.front.Close)
	return h
}

// session returns the next ext_proc stream the fake saw.
func (h *harness) session(t *testing.T) *session {
	t.Helper()
	select {
	case s := <-h.proc.sessions:
		return s
	case <-time.After(testkit.Deadline):
		t.Fatal("no ext_proc stream")
		return nil
	}
}

// do sends a request through the front and returns status, headers and body.
func (h *harness) do(t *testing.T, method, path string, headers map[string]string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, h.front.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp.StatusCode, resp.Header, b
}

// ---- reply builders ----

func setHeader(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}}
}

func reqHeadersReply(cr *extprocsvc.CommonResponse) *extprocsvc.ProcessingResponse {
	return &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocsvc.HeadersResponse{Response: cr}}}
}

func reqBodyReply(cr *extprocsvc.CommonResponse) *extprocsvc.ProcessingResponse {
	return &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_RequestBody{
		RequestBody: &extprocsvc.BodyResponse{Response: cr}}}
}

func respHeadersReply(cr *extprocsvc.CommonResponse) *extprocsvc.ProcessingResponse {
	return &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocsvc.HeadersResponse{Response: cr}}}
}

func respBodyReply(cr *extprocsvc.CommonResponse) *extprocsvc.ProcessingResponse {
	return &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ResponseBody{
		ResponseBody: &extprocsvc.BodyResponse{Response: cr}}}
}

func immediate(code int, body, details string) *extprocsvc.ProcessingResponse {
	return &extprocsvc.ProcessingResponse{Response: &extprocsvc.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocsvc.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(code)},
			Headers: &extprocsvc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("content-type", "application/json")}},
			Body:    []byte(body), Details: details,
		}}}
}

// routeTo is the request-headers reply extproc gives: pick the cluster, clear the
// route cache, in one CommonResponse.
func routeTo(cluster string, extra ...*corev3.HeaderValueOption) *extprocsvc.ProcessingResponse {
	return reqHeadersReply(&extprocsvc.CommonResponse{
		HeaderMutation: &extprocsvc.HeaderMutation{
			SetHeaders:    append([]*corev3.HeaderValueOption{setHeader("x-gateway-upstream", cluster)}, extra...),
			RemoveHeaders: []string{"authorization", "x-api-key"},
		},
		ClearRouteCache: true,
	})
}

func headerMap(m *corev3.HeaderMap) testkit.Headers { return testkit.RawHeaders(m.GetHeaders()) }

func appendHeader(k, v string) *corev3.HeaderValueOption {
	o := setHeader(k, v)
	//lint:ignore SA1019 ext_proc reads only the deprecated append flag (append_action is ignored).
	o.Append = wrapperspb.Bool(true)
	return o
}

type corev3HVO = corev3.HeaderValueOption

// loadBootstrap parses envoy/envoy.yaml for a test to edit.
func loadBootstrap(t testing.TB) *bootstraptest.Bootstrap {
	t.Helper()
	return bootstraptest.Load(t, "../../envoy/envoy.yaml")
}
