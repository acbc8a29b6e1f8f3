package envoy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/internal/testkit"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestSettlementAgainstRealAccounting plays whole responses through the harness wired
// to the real accounting service and checks the ledger: exactly the catalog price of
// the reported usage, what was delivered for a cut stream, nothing for upstream
// failures, and no reservation left held.
func TestSettlementAgainstRealAccounting(t *testing.T) {
	s := startReal(t)
	const start = 1_000_000
	const streamReq = `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"hello world"}]}`
	sse := func(parts ...string) string {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString("data: " + p + "\n\n")
		}
		return b.String()
	}

	tests := []struct {
		name    string
		request string
		status  int
		ct      string
		chunks  []string
		cancel  bool // the client goes away after the chunks (no end_of_stream)
		charged int64
	}{
		{
			name: "non-streamed usage", request: paidChat, status: 200, ct: "application/json",
			chunks: []string{`{"id":"c","object":"chat.completion","model":"mock-gpt","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1234,"completion_tokens":567,"total_tokens":1801}}`},
			// 1234 × $1/M = 1234 micros; 567 × $2/M = 1134 micros.
			charged: 1234 + 1134,
		},
		{
			name: "streamed usage", request: streamReq, status: 200, ct: "text/event-stream",
			chunks: []string{
				sse(`{"id":"c","model":"mock-gpt","choices":[{"index":0,"delta":{"content":"hel"}}],"usage":null}`),
				sse(`{"id":"c","model":"mock-gpt","choices":[{"index":0,"delta":{"content":"lo"}}],"usage":null}`,
					`{"id":"c","model":"mock-gpt","choices":[],"usage":{"prompt_tokens":2000,"completion_tokens":333,"total_tokens":2333}}`, `[DONE]`),
			},
			charged: 2000 + 666,
		},
		{
			// The client closed on [DONE] before Envoy's end_of_stream frame: the usage
			// that came is what the upstream billed.
			name: "client gone after usage", request: streamReq, status: 200, ct: "text/event-stream",
			chunks: []string{
				sse(`{"id":"c","model":"mock-gpt","choices":[{"index":0,"delta":{"content":"hello"}}],"usage":null}`),
				sse(`{"id":"c","model":"mock-gpt","choices":[],"usage":{"prompt_tokens":2000,"completion_tokens":333,"total_tokens":2333}}`, `[DONE]`),
			},
			cancel:  true,
			charged: 2000 + 666,
		},
		{
			name: "stream cut after delivery", request: streamReq, status: 200, ct: "text/event-stream",
			chunks: []string{sse(`{"id":"c","model":"mock-gpt","choices":[{"index":0,"delta":{"content":"hello world"}}],"usage":null}`)},
			cancel: true,
			// Delivered: the prompt as counted locally ("hello world": 2 tokens, plus 4
			// per message and 3 for the reply = 9 tokens at $1/M) and the output sent
			// ("hello world": 2 tokens at $2/M).
			charged: 9 + 4,
		},
		{
			// The provider answered: it has billed the prompt (9 tokens counted locally:
			// "hello world" and the framing), and nothing more is known.
			name: "stream cut before delivery pays the prompt", request: streamReq, status: 200, ct: "text/event-stream",
			cancel: true, charged: 9,
		},
		{
			name: "upstream error", request: paidChat, status: 500, ct: "application/json",
			chunks: []string{`{"error":{"message":"boom"}}`}, charged: 0,
		},
		{
			name: "exhausted upstream account", request: paidChat, status: 429, ct: "application/json",
			chunks:  []string{`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`},
			charged: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acct := s.account(t, "default", start)
			keyID, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
			x, resp := s.post(t, "/v1/chat/completions", tt.request, key)
			if resp.GetRequestBody() == nil {
				t.Fatalf("refused: %v", resp)
			}
			if _, held := s.balance(t, acct); held <= 0 {
				t.Fatalf("nothing held while in flight")
			}
			x.Send(replay.ResponseHeaders(tt.status, "content-type", tt.ct))
			for i, c := range tt.chunks {
				last := i == len(tt.chunks)-1 && !tt.cancel && !strings.HasPrefix(tt.ct, "text/event-stream")
				x.Send(replay.ResponseBody([]byte(c), last))
			}
			if tt.cancel {
				x.Cancel()
			} else {
				if strings.HasPrefix(tt.ct, "text/event-stream") {
					x.Send(replay.ResponseBody(nil, true))
				}
				x.Close()
			}
			// Settlement after a cancel happens when the server sees the stream end.
			testkit.WaitFor(t, "the hold settled", func() bool { _, held := s.balance(t, acct); return held == 0 })
			bal, _ := s.balance(t, acct)
			if got := start - bal; got != tt.charged {
				t.Errorf("charged %d micros, want %d", got, tt.charged)
			}
			k, err := s.admin.GetKey(context.Background(), &accountingv1.GetKeyRequest{KeyId: keyID})
			if err != nil {
				t.Fatal(err)
			}
			if k.GetKey().GetSpentTodayMicros() != tt.charged || k.GetKey().GetHeldTodayMicros() != 0 {
				t.Errorf("key spent %d held %d, want %d 0", k.GetKey().GetSpentTodayMicros(), k.GetKey().GetHeldTodayMicros(), tt.charged)
			}
		})
	}
}
