package envoy_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/ledger"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/internal/testkit"
)

// TestClientGoneAfterUsageChargesUsage: the upstream's usage event reached extproc (and
// the client), then the stream ended without end_of_stream — the client closed on
// [DONE] or message_stop while Envoy's empty end_of_stream frame was still to come.
// The upstream billed that usage, so the charge is the usage's catalog price, not the
// local estimate of what was delivered.
func TestClientGoneAfterUsageChargesUsage(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		request string
		chunks  []string
		in, out int64
		actual  int64
	}{
		{
			name:    "chat, usage chunk and [DONE] then gone",
			path:    "/v1/chat/completions",
			request: `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"x"}]}`,
			chunks: []string{
				"data: {\"id\":\"c\",\"model\":\"mock-gpt\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello world\"}}],\"usage\":null}\n\n",
				"data: {\"id\":\"c\",\"model\":\"mock-gpt\",\"choices\":[],\"usage\":{\"prompt_tokens\":2000,\"completion_tokens\":333}}\n\ndata: [DONE]\n\n",
			},
			// 2000 in at $1/M + 333 out at $2/M.
			in: 2000, out: 333, actual: 2000 + 666,
		},
		{
			name:    "messages, message_delta and message_stop then gone",
			path:    "/v1/messages",
			request: `{"model":"demo-claude","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"x"}]}`,
			chunks: []string{
				"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"mock-claude\",\"content\":[],\"usage\":{\"input_tokens\":1000,\"output_tokens\":1}}}\n\n" +
					"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello world\"}}\n\n",
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":50}}\n\n" +
					"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			},
			// 1000 in at $3/M + 50 out at $15/M.
			in: 1000, out: 50, actual: 3000 + 750,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			h := replay.Start(t, replay.Service(t, f))
			x := admitOn(t, h, tt.path, tt.request)
			x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
			for _, c := range tt.chunks {
				x.Send(replay.ResponseBody([]byte(c), false))
			}
			x.Cancel()
			testkit.WaitFor(t, "the settlement", func() bool { _, c, rel := f.Counts(); return c+rel == 1 })
			if len(f.Commits) != 1 {
				t.Fatalf("commits %+v releases %v, want one commit", f.Commits, f.Releases)
			}
			c := f.Commits[0]
			if c.Usage.InputTokens != tt.in || c.Usage.OutputTokens != tt.out || c.Actual != tt.actual {
				t.Errorf("commit = %+v, want usage %d/%d charged %d", c, tt.in, tt.out, tt.actual)
			}
		})
	}
}

// admitOn plays an admitted request on path with the paid key and returns its exchange.
func admitOn(t *testing.T, h *replay.Harness, path, body string) *replay.Exchange {
	t.Helper()
	x, _, resp := h.Post(t, path, []byte(body), bearer(keyPaid)...)
	if resp.GetRequestBody() == nil {
		t.Fatalf("not admitted: %v", resp)
	}
	return x
}

// panickyLedger panics in RecordVideoTask, standing in for any bug that panics inside a
// phase after the reservation was made.
type panickyLedger struct{ *replay.FakeLedger }

func (p panickyLedger) RecordVideoTask(context.Context, string, string, string, ledger.TaskOrigin) error {
	panic("bug in a phase")
}

// TestPanicInPhaseSettlesAndServerSurvives: a panic inside a phase must not take the
// process down (every other stream's hold would then wait for expiry, and partly
// delivered streams would never be charged); the stream ends with an error, its hold
// is released, and the server keeps serving.
func TestPanicInPhaseSettlesAndServerSurvives(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, panickyLedger{f}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := h.Client.Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"model":"demo-video","prompt":"a wave"}`)
	for _, m := range []*extprocv3.ProcessingRequest{
		replay.PostHeaders("/v1/video/generations", len(body), bearer(keyPaid)...),
		replay.RequestBody(body, true),
		replay.ResponseHeaders(200, "content-type", "application/json"),
		replay.ResponseBody([]byte(`{"id":"vid_1","model":"mock-video","status":"queued"}`), true),
	} {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
		if _, err = s.Recv(); err != nil {
			break
		}
	}
	if status.Code(err) != codes.Internal {
		t.Fatalf("stream ended with %v, want Internal after the panic", err)
	}
	testkit.WaitFor(t, "the settlement", func() bool { _, c, rel := f.Counts(); return c+rel == 1 })
	if len(f.Commits) != 0 || len(f.Releases) != 1 || !strings.HasSuffix(f.Releases[0], ":panic") {
		t.Fatalf("commits %+v releases %v, want one release for the panic", f.Commits, f.Releases)
	}
	// The server is still up.
	y := admit(t, h, chatOK)
	y.Close()
}

// TestRewriteFailureAfterUsageChargesUsage: when the rewriter gives up on an event that
// follows the usage chunk, the stream is settled on that usage, not on the estimate.
func TestRewriteFailureAfterUsageChargesUsage(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	x := admit(t, h, `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
	x.Send(replay.ResponseBody([]byte("data: {\"id\":\"c\",\"model\":\"mock-gpt\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello world\"}}],\"usage\":null}\n\n"+
		"data: {\"id\":\"c\",\"model\":\"mock-gpt\",\"choices\":[],\"usage\":{\"prompt_tokens\":2000,\"completion_tokens\":333}}\n\n"), false))
	// An event over the 1 MiB limit: the rewriter fails on it.
	x.Send(replay.ResponseBody([]byte("data: {\"x\":\""+strings.Repeat("a", 1<<20)+"\"}\n\n"), false))
	x.Send(replay.ResponseBody(nil, true))
	x.Close()
	if len(f.Commits) != 1 || f.Commits[0].Actual != 2000+666 || len(f.Releases) != 0 {
		t.Fatalf("commits %+v releases %v, want one commit of the usage (2666)", f.Commits, f.Releases)
	}
}

// goneLedger answers every Commit with ledger.ErrNotFound (accounting does not know
// the reservation), counting the calls.
type goneLedger struct {
	*replay.FakeLedger
	mu      sync.Mutex
	commits int
}

func (g *goneLedger) Commit(context.Context, ledger.CommitRequest) (ledger.CommitResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.commits++
	return ledger.CommitResult{}, ledger.ErrNotFound
}

// TestSettlementDoesNotRetryNotFound: an unknown reservation is a final answer, like a
// refusal; retrying it only holds the stream (and a drain) for the whole settle timeout.
func TestSettlementDoesNotRetryNotFound(t *testing.T) {
	g := &goneLedger{FakeLedger: newFake()}
	h := replay.Start(t, replay.Service(t, g))
	x := admit(t, h, chatOK)
	x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
	x.Send(replay.ResponseBody([]byte(`{"id":"c","model":"mock-gpt","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}`), true))
	x.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.commits != 1 {
		t.Errorf("commit tried %d times, want 1", g.commits)
	}
}
