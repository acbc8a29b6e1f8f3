// Package replay is the test harness that plays Envoy's side of the ext_proc protocol
// over real gRPC against the real extproc server: the message sequences Envoy 1.37+
// sends (docs/design/envoy-extproc.md), built from small helpers, and a fake Ledger for unit
// tests. It is used by tests only.
package replay

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/envoy"
	"github.com/llmgw/gateway/extproc/health"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/tokens"
	"github.com/llmgw/gateway/extproc/xds"
	"github.com/llmgw/gateway/internal/demoenv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"
)

// DemoCatalog loads deploy/local/catalog.yaml with the local stack's credentials
// (demoenv.Lookup).
func DemoCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "..", "deploy", "local", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Parse(data, demoenv.Lookup, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	counterOnce sync.Once
	counter     *tokens.Counter
	counterErr  error
)

// Counter returns a shared token counter (the vocabulary loads once per test binary).
func Counter(t testing.TB) *tokens.Counter {
	counterOnce.Do(func() { counter, counterErr = tokens.New() })
	if counterErr != nil {
		t.Fatal(counterErr)
	}
	return counter
}

// Service builds a lifecycle service over the demo catalog and l, with the first
// channel always picked and sequential reservation ids; opts adjust the config (a fake
// webhook resolver, another catalog).
//
// Each replayed exchange stands for itself: the channels' health sees every cooldown
// over (its clock jumps a day per reading), so a case that makes a channel fail does not
// turn the next case away. Tests of health across requests pass their own Tracker.
func Service(t testing.TB, l lifecycle.Ledger, opts ...func(*lifecycle.Config)) *lifecycle.Service {
	t.Helper()
	var mu sync.Mutex
	n := 0
	var clock time.Time
	cfg := lifecycle.Config{
		Catalog: DemoCatalog(t), Ledger: l, Counter: Counter(t),
		Health: health.New(health.Config{Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(24 * time.Hour)
			return clock
		}}),
		Intn: func(int) int { return 0 },
		NewID: func() string {
			mu.Lock()
			defer mu.Unlock()
			n++
			return "req-" + strconv.Itoa(n)
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	svc, err := lifecycle.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// Harness is a running extproc gRPC server on a loopback listener and a client to it.
type Harness struct {
	Client extprocv3.ExternalProcessorClient
	svc    *lifecycle.Service
}

// Start serves svc over gRPC on 127.0.0.1 until the test ends.
func Start(t testing.TB, svc *lifecycle.Service) *Harness {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, envoy.New(svc, nil))
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
	})
	return &Harness{Client: extprocv3.NewExternalProcessorClient(conn), svc: svc}
}

// Exchange is one HTTP request's stream.
type Exchange struct {
	t      testing.TB
	h      *Harness
	stream extprocv3.ExternalProcessor_ProcessClient
	cancel context.CancelFunc
}

// Open starts a stream.
func (h *Harness) Open(t testing.TB) *Exchange {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	s, err := h.Client.Process(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return &Exchange{t: t, h: h, stream: s, cancel: cancel}
}

// OpenAttempt starts an attempt's stream: the failover cluster's upstream ext_proc,
// which names itself in the gRPC initial metadata (extproc/xds.AttemptHeader).
func (h *Harness) OpenAttempt(t testing.TB) *Exchange {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	ctx = metadata.AppendToOutgoingContext(ctx, xds.AttemptHeader, xds.AttemptValue)
	s, err := h.Client.Process(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return &Exchange{t: t, h: h, stream: s, cancel: cancel}
}

// AttemptHeaders is an attempt's request_headers as Envoy's upstream ext_proc sends
// them: the request as the router forwards it (with its x-request-id) and, as the
// filter's attribute, the channel of the endpoint the attempt picked.
func AttemptHeaders(requestID, channel string, kv ...string) *extprocv3.ProcessingRequest {
	m := RequestHeaders(false, append([]string{":method", "POST", ":path", "/v1/chat/completions",
		":authority", "gateway", ":scheme", "http", "content-type", "application/json", "x-request-id", requestID}, kv...)...)
	m.Attributes = map[string]*structpb.Struct{"envoy.filters.http.ext_proc": {Fields: map[string]*structpb.Value{
		xds.AttemptAttribute: structpb.NewStringValue(channel)}}}
	return m
}

// Send sends msg and returns the server's answer.
func (x *Exchange) Send(msg *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	x.t.Helper()
	if err := x.stream.Send(msg); err != nil {
		x.t.Fatalf("send: %v", err)
	}
	resp, err := x.stream.Recv()
	if err != nil {
		x.t.Fatalf("recv: %v", err)
	}
	return resp
}

// Close half-closes the stream as Envoy does at the end of a request and waits until
// the server has finished it and every settlement in the background has ended.
func (x *Exchange) Close() {
	x.t.Helper()
	defer x.cancel()
	_ = x.stream.CloseSend()
	for {
		if _, err := x.stream.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				x.t.Fatalf("stream ended with %v", err)
			}
			x.h.WaitSettled(x.t)
			return
		}
		x.t.Fatal("spurious message from the server")
	}
}

// WaitSettled waits until the service's background settlements have ended (commits and
// releases run after the reply).
func (h *Harness) WaitSettled(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.svc.WaitSettled(ctx); err != nil {
		t.Fatalf("settlements did not end: %v", err)
	}
}

// Cancel resets the stream as Envoy does on a client disconnect.
func (x *Exchange) Cancel() { x.cancel() }

// Headers builds a header map with raw_value set (value empty), as Envoy sends it.
func Headers(kv ...string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return hm
}

// RequestHeaders is a request_headers message.
func RequestHeaders(endOfStream bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: Headers(kv...), EndOfStream: endOfStream}}}
}

// PostHeaders is the request_headers of a POST to path with a JSON body of length n
// (n < 0: chunked, no content-length) and the extra headers.
func PostHeaders(path string, n int, extra ...string) *extprocv3.ProcessingRequest {
	kv := []string{":method", "POST", ":path", path, ":authority", "gateway", ":scheme", "http",
		"content-type", "application/json", "x-forwarded-proto", "http"}
	if n >= 0 {
		kv = append(kv, "content-length", strconv.Itoa(n))
	}
	return RequestHeaders(false, append(kv, extra...)...)
}

// RequestBody is a request_body message.
func RequestBody(body []byte, endOfStream bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: endOfStream}}}
}

// ResponseHeaders is a response_headers message with :status and the headers.
func ResponseHeaders(status int, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: Headers(append([]string{":status", strconv.Itoa(status)}, kv...)...)}}}
}

// ResponseBody is a response_body message.
func ResponseBody(body []byte, endOfStream bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: body, EndOfStream: endOfStream}}}
}

// Post plays a whole POST request side: headers (with content-length) then the body in
// one message. It returns the headers reply and the body reply (nil when the headers
// reply was an immediate response).
func (h *Harness) Post(t testing.TB, path string, body []byte, extra ...string) (x *Exchange, hdr, bdy *extprocv3.ProcessingResponse) {
	t.Helper()
	x = h.Open(t)
	hdr = x.Send(PostHeaders(path, len(body), extra...))
	if hdr.GetImmediateResponse() != nil {
		return x, hdr, nil
	}
	return x, hdr, x.Send(RequestBody(body, true))
}

// FakeLedger is a hand-written Ledger: keys by hash, a scripted Reserve outcome, and a
// record of every call. Safe for concurrent use.
type FakeLedger struct {
	mu       sync.Mutex
	Grants   map[string]ledger.Grant // by string(hash)
	ReserveE error                   // returned by Reserve when set
	Reserves []ledger.ReserveRequest
	// Commits are the commits that landed. A commit of a reservation already committed
	// is answered as accounting does, with the first result, Replayed; CommitE, when
	// set, refuses every commit instead; the first LostCommitAnswers commits land but
	// their answers are lost (a transport error).
	Commits           []ledger.CommitRequest
	CommitE           error
	LostCommitAnswers int
	charged           map[string]int64 // by reservation id
	Releases          []string
	Renewals          []string
	Auths             int
	// Tasks are the video tasks GetVideoTask returns (RecordVideoTask adds to them);
	// Recorded lists every RecordVideoTask call's task id; RecordE fails those calls.
	Tasks    map[string]lifecycle.VideoTask
	Recorded []string
	RecordE  error
	// RecordFailures, when positive, limits RecordE to the first that many calls.
	RecordFailures int
}

var _ lifecycle.Ledger = (*FakeLedger)(nil)

// AddKey registers a key secret with its grant.
func (f *FakeLedger) AddKey(secret string, g ledger.Grant) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Grants == nil {
		f.Grants = map[string]ledger.Grant{}
	}
	f.Grants[string(HashKey(secret))] = g
}

// Authenticate implements lifecycle.Ledger.
func (f *FakeLedger) Authenticate(_ context.Context, hash []byte) (ledger.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Auths++
	g, ok := f.Grants[string(hash)]
	if !ok {
		return ledger.Grant{}, ledger.Refuse(ledger.ReasonInvalidAPIKey, "unknown key")
	}
	return g, nil
}

// Reserve implements lifecycle.Ledger.
func (f *FakeLedger) Reserve(_ context.Context, r ledger.ReserveRequest) (ledger.Reservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Reserves = append(f.Reserves, r)
	if f.ReserveE != nil {
		return ledger.Reservation{}, f.ReserveE
	}
	return ledger.Reservation{ID: "res-" + r.RequestID, KeyID: r.KeyID, Model: r.Model, Amount: r.Amount, Pool: r.Pool, State: ledger.StateHeld}, nil
}

// Commit implements lifecycle.Ledger.
func (f *FakeLedger) Commit(_ context.Context, c ledger.CommitRequest) (ledger.CommitResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.CommitE != nil {
		return ledger.CommitResult{}, f.CommitE
	}
	if charged, ok := f.charged[c.ReservationID]; ok {
		return ledger.CommitResult{Charged: charged, Replayed: true}, nil
	}
	if f.charged == nil {
		f.charged = map[string]int64{}
	}
	f.charged[c.ReservationID] = c.Actual
	f.Commits = append(f.Commits, c)
	if f.LostCommitAnswers > 0 {
		f.LostCommitAnswers--
		return ledger.CommitResult{}, ErrAnswerLost
	}
	return ledger.CommitResult{Charged: c.Actual}, nil
}

// ErrAnswerLost is a ledger call whose answer never came back (it may have landed).
var ErrAnswerLost = errors.New("replay: the answer was lost")

// Release implements lifecycle.Ledger.
func (f *FakeLedger) Release(_ context.Context, id, reason string) (ledger.ReleaseResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Releases = append(f.Releases, id+":"+reason)
	return ledger.ReleaseResult{State: ledger.StateReleased}, nil
}

// Counts returns how many Reserve, Commit and Release calls were made.
func (f *FakeLedger) Counts() (reserves, commits, releases int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.Reserves), len(f.Commits), len(f.Releases)
}

// RecordVideoTask implements lifecycle.Ledger: the task is owned by the key's grant (as
// registered with AddKey) and has age 0. RecordE, when set, is returned instead.
// Renew records the renewal.
// RenewalCount returns how many Renew calls were made.
func (f *FakeLedger) RenewalCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.Renewals)
}

// Renew implements lifecycle.Ledger.
func (f *FakeLedger) Renew(_ context.Context, id string, ttl time.Duration) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Renewals = append(f.Renewals, id)
	return time.Now().Add(ttl), nil
}

func (f *FakeLedger) RecordVideoTask(_ context.Context, taskID, keyID, model string, origin ledger.TaskOrigin) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Recorded = append(f.Recorded, taskID)
	if f.RecordE != nil && (f.RecordFailures == 0 || len(f.Recorded) <= f.RecordFailures) {
		return f.RecordE
	}
	if f.Tasks == nil {
		f.Tasks = map[string]lifecycle.VideoTask{}
	}
	if origin.UpstreamTaskID == "" {
		origin.UpstreamTaskID = taskID
	}
	t := lifecycle.VideoTask{VideoTask: ledger.VideoTask{TaskID: taskID, KeyID: keyID, Model: model, Origin: origin}}
	for _, g := range f.Grants {
		if g.KeyID == keyID {
			t.AccountID, t.AdminCreatedKey = g.AccountID, g.AdminCreated
		}
	}
	f.Tasks[taskID] = t
	return nil
}

// GetVideoTask implements lifecycle.Ledger from Tasks; unknown ids are
// ledger.ErrNotFound.
func (f *FakeLedger) GetVideoTask(_ context.Context, taskID string) (lifecycle.VideoTask, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.Tasks[taskID]
	if !ok {
		return lifecycle.VideoTask{}, ledger.ErrNotFound
	}
	return t, nil
}

// SetTask stores a task as accounting would return it (owner and age); a task without
// the provider's id has the gateway's, as accounting reads a task recorded before it
// kept origins.
func (f *FakeLedger) SetTask(t lifecycle.VideoTask) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Origin.UpstreamTaskID == "" {
		t.Origin.UpstreamTaskID = t.TaskID
	}
	if f.Tasks == nil {
		f.Tasks = map[string]lifecycle.VideoTask{}
	}
	f.Tasks[t.TaskID] = t
}
