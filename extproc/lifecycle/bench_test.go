package lifecycle_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
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

// BenchmarkRequestSide is one admitted chat request through the lifecycle: headers,
// body (validation, token estimate, reservation, mutation), a JSON response with usage
// and the commit, with a ledger that costs nothing.
func BenchmarkRequestSide(b *testing.B) {
	svc := replay.Service(b, nopLedger{grant: ledger.Grant{KeyID: "k", AccountID: "a", Tier: "default", AccountToppedUp: true}})
	ctx := context.Background()
	headers := []lifecycle.Header{
		{":method", "POST"}, {":path", "/v1/chat/completions"}, {":authority", "gw"}, {":scheme", "http"},
		{"content-type", "application/json"}, {"content-length", "300"},
		{"authorization", "Bearer gw-bench00000000000000000000000000000000000000000"},
	}
	body := []byte(`{"model":"demo-chat","max_tokens":256,"temperature":0.7,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a short poem about the sea, in four lines, with a rhyme."}]}`)
	resp := []byte(`{"id":"c","object":"chat.completion","created":1,"model":"mock-gpt","choices":[{"index":0,"message":{"role":"assistant","content":"The sea..."},"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":40,"total_tokens":70}}`)
	respHeaders := []lifecycle.Header{{":status", "200"}, {"content-type", "application/json"}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := svc.NewRequest()
		if a := r.RequestHeaders(ctx, headers, false); a.Immediate != nil {
			b.Fatal(string(a.Immediate.Body))
		}
		if a := r.RequestBody(ctx, body, true); a.Immediate != nil || !a.ReplaceBody {
			b.Fatal(string(a.Immediate.Body))
		}
		r.ResponseHeaders(ctx, 200, respHeaders, false)
		r.ResponseBody(ctx, resp, true)
		r.End(ctx, "done")
	}
}

// BenchmarkRequestSideLong is the request side of a streamed chat request carrying a
// conversation of ten 3.2 KB messages (≈33 KB): validation, parsing, the estimate and
// the rewrite (model, stream_options). The token counts of its texts are remembered
// after the first run (package tokens), so this measures what the body costs besides
// counting them (BenchmarkText measures that).
func BenchmarkRequestSideLong(b *testing.B) {
	svc := replay.Service(b, nopLedger{grant: ledger.Grant{KeyID: "k", AccountID: "a", Tier: "default", AccountToppedUp: true}})
	ctx := context.Background()
	words := strings.Fields("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches under the pale northern lights and everyone agrees")
	var msgs []map[string]string
	for m := range 10 {
		var sb strings.Builder
		for sb.Len() < 3200 {
			sb.WriteString(words[(sb.Len()*7+m)%len(words)])
			sb.WriteString(" ")
		}
		role := "user"
		if m%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]string{"role": role, "content": sb.String()})
	}
	body, err := json.Marshal(map[string]any{"model": "demo-chat", "max_tokens": 256, "stream": true, "messages": msgs})
	if err != nil {
		b.Fatal(err)
	}
	headers := []lifecycle.Header{
		{":method", "POST"}, {":path", "/v1/chat/completions"}, {":authority", "gw"}, {":scheme", "http"},
		{"content-type", "application/json"}, {"content-length", strconv.Itoa(len(body))},
		{"authorization", "Bearer gw-bench00000000000000000000000000000000000000000"},
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := svc.NewRequest()
		if a := r.RequestHeaders(ctx, headers, false); a.Immediate != nil {
			b.Fatal(string(a.Immediate.Body))
		}
		if a := r.RequestBody(ctx, body, true); a.Immediate != nil || !a.ReplaceBody {
			b.Fatal("not admitted")
		}
		r.End(ctx, "done")
	}
}
