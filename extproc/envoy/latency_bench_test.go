package envoy_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/extproc/internal/replay"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// BenchmarkAddedLatency measures what extproc and accounting add to one paid chat
// request, end to end over real gRPC and the real accounting service on PostgreSQL:
// Envoy's side is played by the replay harness, with the exact messages Envoy sends
// (request headers, buffered body, response headers, response body). The admission
// latency (headers + body: key lookup, reservation) and the settlement latency (the
// response body reply, which commits) are reported as p50/p99 in milliseconds, with
// GOMAXPROCS requests in flight at once across 32 accounts. The harness, extproc,
// accounting and PostgreSQL all share this machine's cores.
func BenchmarkAddedLatency(b *testing.B) {
	s := startReal(b)
	const accounts = 32
	keys := make([]string, accounts)
	for i := range keys {
		acct := s.account(b, "enterprise", 1_000_000_000)
		_, keys[i] = s.key(b, &accountingv1.CreateKeyRequest{AccountId: acct})
	}
	body := []byte(`{"model":"demo-chat","max_completion_tokens":64,"messages":[{"role":"user","content":"hello there"}]}`)
	upstream := []byte(`{"id":"c","object":"chat.completion","model":"mock-gpt","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)

	var mu sync.Mutex
	var admit, settle []time.Duration
	var n int
	b.SetParallelism(1)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			key := keys[n%accounts]
			n++
			mu.Unlock()

			t0 := time.Now()
			x, _, resp := s.h.Post(b, "/v1/chat/completions", body, "authorization", "Bearer "+key)
			t1 := time.Now()
			if resp.GetRequestBody() == nil {
				b.Errorf("refused: %v", resp)
				x.Close()
				return
			}
			x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
			t2 := time.Now()
			x.Send(replay.ResponseBody(upstream, true))
			t3 := time.Now()
			x.Close()

			mu.Lock()
			admit = append(admit, t1.Sub(t0))
			settle = append(settle, t3.Sub(t2))
			mu.Unlock()
		}
	})
	b.StopTimer()
	report(b, "admit", admit)
	report(b, "settle", settle)
}

func report(b *testing.B, name string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	q := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(q(0.50), fmt.Sprintf("%s-p50-ms", name))
	b.ReportMetric(q(0.99), fmt.Sprintf("%s-p99-ms", name))
}
