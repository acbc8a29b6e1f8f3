package metrics_test

import (
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/metrics"
	"strconv"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/llmgw/gateway/extproc/envoy"
	"github.com/llmgw/gateway/extproc/internal/replay"
)

// BenchmarkServeWithMetrics is one whole buffered chat request through the adapter with
// the metrics observer; compare with -bench=WithoutMetrics for the cost of observing.
func BenchmarkServeWithMetrics(b *testing.B) { benchServe(b, true) }

func BenchmarkServeWithoutMetrics(b *testing.B) { benchServe(b, false) }

func benchServe(b *testing.B, observe bool) {
	f := newFixture(b)
	srv := f.srv
	if !observe {
		srv = envoy.New(replay.Service(b, f.l), nil)
	}
	msgs := append(post("/v1/chat/completions", chat, auth()...),
		replay.ResponseHeaders(200, "content-type", "application/json"),
		replay.ResponseBody([]byte(`{"model":"mock-gpt","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}}`), true))
	b.ReportAllocs()
	for b.Loop() {
		s := &fakeStream{msgs: append([]*extprocv3.ProcessingRequest(nil), msgs...)}
		if err := srv.Serve(s); err != nil {
			b.Fatal(err)
		}
	}
}

// streamEvents is how many content events BenchmarkServeStreamEvent's answer carries.
const streamEvents = 256

// BenchmarkServeStreamEvent is extproc's cost per server-sent event of a streamed chat
// answer that arrives one event per body message, through the adapter with metrics: an op
// is one request (as BenchmarkServeWithMetrics) whose answer is streamEvents content
// events, then the usage event and [DONE]; ns/event is the op's time over streamEvents,
// so it includes the request's own work spread over them.
func BenchmarkServeStreamEvent(b *testing.B) {
	f := newFixture(b)
	msgs := append(post("/v1/chat/completions", `{"model":"demo-chat","stream":true,"max_tokens":4096,"messages":[{"role":"user","content":"hello"}]}`, auth()...),
		replay.ResponseHeaders(200, "content-type", "text/event-stream"))
	const head = `data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"mock-gpt","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[`
	for i := range streamEvents {
		ev := head + `{"index":0,"delta":{"content":" word` + strconv.Itoa(i) + `"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
		msgs = append(msgs, replay.ResponseBody([]byte(ev), false))
	}
	last := head + `],"usage":{"prompt_tokens":9,"completion_tokens":` + strconv.Itoa(2*streamEvents) + `,"total_tokens":` + strconv.Itoa(9+2*streamEvents) + `}}` + "\n\ndata: [DONE]\n\n"
	msgs = append(msgs, replay.ResponseBody([]byte(last), true))
	b.ReportAllocs()
	for b.Loop() {
		s := &fakeStream{msgs: append([]*extprocv3.ProcessingRequest(nil), msgs...)}
		if err := f.srv.Serve(s); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*streamEvents), "ns/event")
}

// BenchmarkObserve is the metrics' cost of one finished request's record: a streamed
// chat success with its landed commit, on the gateway_* counters only (no provider: no
// GenAI operation) and with the GenAI histograms.
func BenchmarkObserve(b *testing.B) {
	m := metrics.New(replay.DemoCatalog(b))
	start := time.Now()
	rec := lifecycle.Record{
		Facts:     lifecycle.Facts{Endpoint: "/v1/chat/completions", Model: "demo-chat", Channel: "mock-demo-chat"},
		Operation: "chat", Provider: "openai", ResponseModel: "mock-gpt", Stream: true,
		Reply: lifecycle.Reply{Answered: true, UpstreamStatus: 200, Streamed: true, Complete: true},
		Timing: lifecycle.Timing{Start: start, FirstChunk: start.Add(200 * time.Millisecond),
			LastChunk: start.Add(2 * time.Second), End: start.Add(2 * time.Second)},
		Settlement: lifecycle.Settlement{Reservation: "r1", HoldMicros: 1000, Outcome: lifecycle.OutcomeCommit,
			ChargedMicros: 100, Usage: ledger.Usage{InputTokens: 12, OutputTokens: 340}},
	}
	for _, bc := range []struct{ name, provider string }{{"gateway", ""}, {"genai", "openai"}} {
		b.Run(bc.name, func(b *testing.B) {
			rec.Provider = bc.provider
			b.ReportAllocs()
			for b.Loop() {
				m.Observe(rec)
			}
		})
	}
}
