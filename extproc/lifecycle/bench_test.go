package lifecycle_test

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/internal/logging"
)

// nopLedger admits everything without recording, so the benchmark measures extproc.
type nopLedger struct{ grant ledger.Grant }

var _ lifecycle.Ledger = nopLedger{}

func (n nopLedger) Authenticate(context.Context, []byte) (ledger.Grant, error) { return n.grant, nil }
func (nopLedger) Reserve(_ context.Context, r ledger.ReserveRequest) (ledger.Reservation, error) {
	return ledger.Reservation{ID: "r", Amount: r.Amount}, nil
}
func (nopLedger) Commit(_ context.Context, c ledger.CommitRequest) (ledger.CommitResult, error) {
	return ledger.CommitResult{Charged: c.Actual}, nil
}
func (nopLedger) Release(context.Context, string, string) (ledger.ReleaseResult, error) {
	return ledger.ReleaseResult{State: ledger.StateReleased}, nil
}
func (nopLedger) RecordVideoTask(context.Context, string, string, string, ledger.TaskOrigin) error {
	return nil
}
func (nopLedger) Renew(context.Context, string, time.Duration) (time.Time, error) {
	return time.Time{}, nil
}
func (nopLedger) GetVideoTask(context.Context, string) (lifecycle.VideoTask, error) {
	return lifecycle.VideoTask{}, ledger.ErrNotFound
}

// nopService is a lifecycle service whose ledger admits everything at no cost.
func nopService(tb testing.TB) *lifecycle.Service {
	return replay.Service(tb, nopLedger{grant: benchGrant})
}

// benchGrant is what nopLedger's keys are granted.
var benchGrant = ledger.Grant{KeyID: "k", AccountID: "a", Tier: "default", AccountToppedUp: true}

// admitChat starts a request on svc and sends it the headers and the chat body, which it
// must admit (no immediate reply) and rewrite (the upstream model).
func admitChat(tb testing.TB, svc *lifecycle.Service, headers []lifecycle.Header, body []byte) *lifecycle.Request {
	tb.Helper()
	ctx := context.Background()
	r := svc.NewRequest()
	if a := r.RequestHeaders(ctx, headers, false); a.Immediate != nil {
		tb.Fatal(string(a.Immediate.Body))
	}
	switch a := r.RequestBody(ctx, body, true); {
	case a.Immediate != nil:
		tb.Fatal(string(a.Immediate.Body))
	case !a.ReplaceBody:
		tb.Fatal("admitted without its body rewritten")
	}
	return r
}

// chatHeaders are the request headers Envoy sends with a chat request whose body is body.
func chatHeaders(body []byte) []lifecycle.Header {
	return []lifecycle.Header{
		{":method", "POST"}, {":path", "/v1/chat/completions"}, {":authority", "gw"}, {":scheme", "http"},
		{"content-type", "application/json"}, {"content-length", strconv.Itoa(len(body))},
		{"authorization", "Bearer gw-bench00000000000000000000000000000000000000000"},
	}
}

// BenchmarkRequestSide is one admitted chat request through the lifecycle: headers,
// body (validation, token estimate, reservation, mutation), a JSON response with usage
// and the commit, with a ledger that costs nothing.
func BenchmarkRequestSide(b *testing.B) { requestSide(b, nopService(b)) }

// BenchmarkRequestSideLogged is BenchmarkRequestSide with extproc's own logger (buffered
// JSON lines, here to io.Discard) instead of none: what the request's log lines, its
// settlement record above all, cost.
func BenchmarkRequestSideLogged(b *testing.B) {
	log, stop := logging.Buffered(io.Discard, "extproc")
	defer stop()
	requestSide(b, replay.Service(b, nopLedger{grant: benchGrant}, func(c *lifecycle.Config) { c.Log = log }))
}

func requestSide(b *testing.B, svc *lifecycle.Service) {
	ctx := context.Background()
	body := []byte(`{"model":"demo-chat","max_tokens":256,"temperature":0.7,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a short poem about the sea, in four lines, with a rhyme."}]}`)
	headers := chatHeaders(body)
	resp := []byte(`{"id":"c","object":"chat.completion","created":1,"model":"mock-gpt","choices":[{"index":0,"message":{"role":"assistant","content":"The sea..."},"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":40,"total_tokens":70}}`)
	respHeaders := []lifecycle.Header{{":status", "200"}, {"content-type", "application/json"}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := admitChat(b, svc, headers, body)
		r.ResponseHeaders(ctx, 200, respHeaders, false)
		r.ResponseBody(ctx, resp, true)
		r.End(ctx, "done")
	}
}

// BenchmarkRequestSideLong is the request side of a chat request with a long prompt:
// validation, parsing, the estimate and the rewrite (model, and stream_options when
// streamed). "conversation" carries ten messages of 3.2 KB (≈33 KB) and streams;
// "prompt" is what the load tool's -prompt 16000 sends: one 16 KB message, not
// streamed, its "model" after "messages" (encoding/json orders a map's keys). The token
// counts of the texts are remembered after the first run (package tokens), so this
// measures what the body costs besides counting them (BenchmarkText measures that).
func BenchmarkRequestSideLong(b *testing.B) {
	words := strings.Fields("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches under the pale northern lights and everyone agrees")
	prose := func(n, seed int) string {
		var sb strings.Builder
		for sb.Len() < n {
			sb.WriteString(words[(sb.Len()*7+seed)%len(words)])
			sb.WriteString(" ")
		}
		return sb.String()
	}
	var msgs []map[string]string
	for m := range 10 {
		role := "user"
		if m%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]string{"role": role, "content": prose(3200, m)})
	}
	for _, bc := range []struct {
		name string
		body map[string]any
	}{
		{"conversation", map[string]any{"model": "demo-chat", "max_tokens": 256, "stream": true, "messages": msgs}},
		{"prompt", map[string]any{"model": "demo-chat", "max_tokens": 16,
			"messages": []map[string]string{{"role": "user", "content": prose(16000, 0) + "load test 1"}}}},
	} {
		b.Run(bc.name, func(b *testing.B) { benchRequestSide(b, bc.body) })
	}
}

func benchRequestSide(b *testing.B, v map[string]any) {
	svc := nopService(b)
	ctx := context.Background()
	body, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	headers := chatHeaders(body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		admitChat(b, svc, headers, body).End(ctx, "done")
	}
}
