package translate

import (
	"bytes"
	"os"
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
