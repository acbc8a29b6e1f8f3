package app

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	"github.com/llmgw/gateway/extproc/envoy"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/openai"
	"github.com/llmgw/gateway/extproc/pricing"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestMain(m *testing.M) { tablestest.Main(m) }

// drainFixture is extproc's Main against the real accounting service (gRPC server over
// the PostgreSQL store on a fresh database), with one funded account and key.
type drainFixture struct {
	admin    accountingv1.AdminServiceClient
	account  string
	key      string
	httpAddr string
	client   extprocv3.ExternalProcessorClient
	cancel   context.CancelFunc // the "SIGTERM"
	done     chan int           // Main's exit code
	logs     *syncBuffer
}

const drainTopUp = 10_000_000

// slowCommits delays every commit, so that a Main that returned before its streams'
// settlements finished would be caught with a hold still on the ledger.
type slowCommits struct{ ledger.Store }

func (s slowCommits) Commit(ctx context.Context, c ledger.CommitRequest) (ledger.CommitResult, error) {
	select {
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
		return ledger.CommitResult{}, ctx.Err()
	}
	return s.Store.Commit(ctx, c)
}

func startDrainFixture(t *testing.T, drainTimeout string) *drainFixture {
	t.Helper()
	setDemoEnv(t)
	st, _ := enginetest.NewLedger(t, 8)
	fx := servertest.Start(t, slowCommits{st}, servertest.Options{})
	t.Setenv("GATEWAY_SERVICE_TOKEN", servertest.ServiceToken)
	f := &drainFixture{admin: fx.Admin(t, servertest.AdminToken), done: make(chan int, 1), logs: &syncBuffer{}}
	ctx := context.Background()
	a, err := f.admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{Tier: "default"})
	if err != nil {
		t.Fatal(err)
	}
	f.account = a.GetAccount().GetId()
	if _, err := f.admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: f.account, AmountMicros: drainTopUp}); err != nil {
		t.Fatal(err)
	}
	k, err := f.admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: f.account})
	if err != nil {
		t.Fatal(err)
	}
	f.key = k.GetSecret()

	grpcAddr := freeAddr(t)
	f.httpAddr = freeAddr(t)
	mctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	t.Cleanup(cancel)
	go func() {
		f.done <- Main(mctx, []string{"--listen", grpcAddr, "--metrics-addr", f.httpAddr, "--accounting-addr", fx.Addr,
			"--catalog", demoCatalog(), "--drain-timeout", drainTimeout}, f.logs)
	}()
	waitStatus(t, "http://"+f.httpAddr+"/readyz", http.StatusOK, f.logs)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	f.client = extprocv3.NewExternalProcessorClient(conn)
	return f
}

// waitStatus polls u until it answers want.
func waitStatus(t *testing.T, u string, want int, logs *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered %d; log:\n%s", u, want, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *drainFixture) balance(t *testing.T) (balance, reserved int64) {
	t.Helper()
	a, err := f.admin.GetAccount(context.Background(), &accountingv1.GetAccountRequest{AccountId: f.account})
	if err != nil {
		t.Fatal(err)
	}
	return a.GetAccount().GetBalanceMicros(), a.GetAccount().GetReservedMicros()
}

// exchange sends msg on s and returns the reply.
func exchange(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient, msg *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	t.Helper()
	if err := s.Send(msg); err != nil {
		t.Fatalf("send: %v", err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	return resp
}

const streamBody = `{"model":"demo-chat","stream":true,"max_tokens":1000,"messages":[{"role":"user","content":"tell me a story"}]}`

const firstEvent = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"mock-gpt\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Once upon a time there was a gateway\"}}]}\n\n"

// startStream plays a streamed chat completion up to its first delivered event, as
// Envoy would: admitted, routed, answered 200 text/event-stream, one chunk sent on.
func (f *drainFixture) startStream(t *testing.T) extprocv3.ExternalProcessor_ProcessClient {
	t.Helper()
	s := f.sendUpstream(t)
	r := exchange(t, s, replay.ResponseHeaders(200, "content-type", "text/event-stream"))
	if r.GetModeOverride().GetResponseBodyMode() != filterv3.ProcessingMode_STREAMED {
		t.Fatalf("response headers reply: %v", r)
	}
	r = exchange(t, s, replay.ResponseBody([]byte(firstEvent), false))
	if !strings.Contains(string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()), `"model":"demo-chat"`) {
		t.Fatalf("first event reply: %v", r)
	}
	return s
}

// sendUpstream plays a streamed chat completion's request up to the reply that lets it
// through to the provider, and checks its hold is in place.
func (f *drainFixture) sendUpstream(t *testing.T) extprocv3.ExternalProcessor_ProcessClient {
	t.Helper()
	s, err := f.client.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := exchange(t, s, replay.PostHeaders("/v1/chat/completions", len(streamBody), "authorization", "Bearer "+f.key)); r.GetImmediateResponse() != nil {
		t.Fatalf("headers refused: %v", r)
	}
	if r := exchange(t, s, replay.RequestBody([]byte(streamBody), true)); r.GetRequestBody() == nil {
		t.Fatalf("body refused: %v", r)
	}
	if _, reserved := f.balance(t); reserved <= 0 {
		t.Fatalf("no hold while the stream runs (reserved %d)", reserved)
	}
	return s
}

// waitExit waits for Main's exit code, failing after limit.
func (f *drainFixture) waitExit(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case code := <-f.done:
		return code
	case <-time.After(limit):
		t.Fatalf("Main did not exit within %v; log:\n%s", limit, f.logs.String())
		return -1
	}
}

// TestDrainLetsStreamsFinish: after the stop signal extproc is not ready and refuses
// new streams, but the open stream runs to its end and is charged its usage; then
// Main exits 0 with nothing held.
func TestDrainLetsStreamsFinish(t *testing.T) {
	f := startDrainFixture(t, "30s")
	s := f.startStream(t)

	f.cancel()
	waitStatus(t, "http://"+f.httpAddr+"/readyz", http.StatusServiceUnavailable, f.logs)
	// New streams are refused once the drain has begun (Envoy fails such a request
	// closed). /readyz turns unready a moment before the server stops accepting, so a
	// stream opened in between may still be served: each probe is closed at once (an
	// open one would hold the drain), and the refusal must come soon.
	refused := false
	for deadline := time.Now().Add(5 * time.Second); !refused && time.Now().Before(deadline); {
		ctx, cancel := context.WithCancel(context.Background())
		ns, err := f.client.Process(ctx)
		if err == nil {
			err = ns.Send(replay.RequestHeaders(true, ":method", "GET", ":path", "/v1/models"))
		}
		if err == nil {
			_, err = ns.Recv()
		}
		cancel()
		refused = err != nil
		if !refused {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !refused {
		t.Error("new streams were still served 5 s into the drain")
	}

	last := "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"mock-gpt\",\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":500}}\n\ndata: [DONE]\n\n"
	exchange(t, s, replay.ResponseBody([]byte(last), true))
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream ended with %v, want EOF", err)
	}
	if code := f.waitExit(t, 20*time.Second); code != 0 {
		t.Fatalf("exit %d; log:\n%s", code, f.logs.String())
	}
	// demo-chat: $1/M input, $2/M output.
	want := pricing.PerMillion(20, 1_000_000) + pricing.PerMillion(500, 2_000_000)
	if b, r := f.balance(t); drainTopUp-b != want || r != 0 {
		t.Errorf("charged %d, reserved %d; want %d, 0", drainTopUp-b, r, want)
	}
}

// TestDrainDeadlineSettlesOpenStreams: a stream still open when the drain deadline
// passes is cut, charged what it delivered (its usage never came), and Main exits
// only after that settlement, within the deadline plus the settlement bound.
func TestDrainDeadlineSettlesOpenStreams(t *testing.T) {
	const drain = 300 * time.Millisecond
	f := startDrainFixture(t, drain.String())
	s := f.startStream(t)

	f.cancel()
	if code := f.waitExit(t, drain+envoy.SettleTimeout+10*time.Second); code != 0 {
		t.Fatalf("exit %d; log:\n%s", code, f.logs.String())
	}
	if _, err := s.Recv(); err == nil {
		t.Error("the stream was not cut")
	}
	// What was delivered: the prompt as counted, and the one event's text.
	parsed, perr := openai.ParseChat([]byte(streamBody))
	if perr != nil {
		t.Fatal(perr)
	}
	c := replay.Counter(t)
	in, out := c.Count(parsed.Prompt), int64(c.Text("Once upon a time there was a gateway"))
	want := pricing.PerMillion(in, 1_000_000) + pricing.PerMillion(out, 2_000_000)
	if b, r := f.balance(t); drainTopUp-b != want || r != 0 {
		t.Errorf("charged %d, reserved %d; want %d (%d in, %d out), 0", drainTopUp-b, r, want, in, out)
	}
	if !strings.Contains(f.logs.String(), "drain deadline passed") {
		t.Errorf("log lacks the deadline line:\n%s", f.logs.String())
	}
}

// TestDrainCutBeforeAnswerChargesNothing: a request let through to the provider whose
// stream the drain deadline cuts before any answer gets Envoy's own 500 (a gRPC error,
// failure_mode_allow false), so its hold is released: the prompt is charged to clients
// that leave, never for extproc's own stop.
func TestDrainCutBeforeAnswerChargesNothing(t *testing.T) {
	const drain = 300 * time.Millisecond
	f := startDrainFixture(t, drain.String())
	f.sendUpstream(t)
	f.cancel()
	if code := f.waitExit(t, drain+envoy.SettleTimeout+10*time.Second); code != 0 {
		t.Fatalf("exit %d; log:\n%s", code, f.logs.String())
	}
	if b, r := f.balance(t); drainTopUp-b != 0 || r != 0 {
		t.Errorf("charged %d, reserved %d; want 0, 0", drainTopUp-b, r)
	}
}
