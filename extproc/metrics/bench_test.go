package metrics_test

import (
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
