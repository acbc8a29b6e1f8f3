package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// BenchmarkStreamEvent is the cost of translating one upstream event, per pair: the
// recorded stream of each upstream API fed whole, divided by its event count.
func BenchmarkStreamEvent(b *testing.B) {
	for _, up := range apis {
		in, err := os.ReadFile("testdata/streams/" + up.String() + ".sse")
		if err != nil {
			b.Fatal(err)
		}
		events := bytes.Count(in, []byte("\n\n"))
		for _, client := range apis {
			tr, ok := New(client, up)
			if !ok {
				continue
			}
			b.Run(up.String()+"→"+client.String(), func(b *testing.B) {
				b.SetBytes(int64(len(in)))
				o := ResponseOptions{PublicModel: "public-model", IncludeUsage: true}
				for b.Loop() {
					if _, err := tr.Stream(o).Write(in, true); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events)/1000, "µs/event")
			})
		}
	}
}

// BenchmarkRequest is the cost of translating a chat request carrying a conversation of
// ten 3.2 KB messages (≈33 KB), per pair.
func BenchmarkRequest(b *testing.B) {
	words := strings.Fields("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches under the pale northern lights and everyone agrees")
	var msgs []map[string]any
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
		msgs = append(msgs, map[string]any{"role": role, "content": sb.String()})
	}
	bodies := map[API][]byte{}
	bodies[Chat], _ = json.Marshal(map[string]any{"model": "m", "max_tokens": 256, "stream": true, "messages": msgs})
	bodies[Messages], _ = json.Marshal(map[string]any{"model": "m", "max_tokens": 256, "stream": true, "messages": msgs})
	bodies[Responses], _ = json.Marshal(map[string]any{"model": "m", "max_output_tokens": 256, "stream": true, "input": msgs})
	for _, client := range apis {
		for _, up := range apis {
			tr, ok := New(client, up)
			if !ok {
				continue
			}
			body := bodies[client]
			b.Run(client.String()+"→"+up.String(), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := tr.Request(body, RequestOptions{UpstreamModel: "u", MaxOutput: 1024}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
