package codec

import (
	"reflect"
	"testing"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// typical is the pair of events of one request: its hold and its charge.
func typical() (machine.Reserved, machine.Committed) {
	r := machine.Reserved{ID: resvID, RequestID: "0123456789abcdef0123456789abcdef01234567", AccountID: acctID,
		KeyID: keyID, Model: modelID, Amount: 48_000, Pool: ledger.PoolGeneral, At: at, ExpiresAt: later}
	c := machine.Committed{ReservationID: resvID, Actual: 16_000, Charged: 16_000,
		Usage: ledger.Usage{InputTokens: 1200, OutputTokens: 300, ServiceTier: "default",
			Components: []ledger.Component{{Name: "input", Units: 1200, PricePerMTok: 5_000_000, Amount: 6_000},
				{Name: "output", Units: 300, PricePerMTok: 33_333_334, Amount: 10_000}}},
		UpstreamModel: modelID, Channel: "mock", At: at.Add(1500 * 1000 * 1000)}
	return r, c
}

// BenchmarkEncode and BenchmarkDecode report a typical hold's and charge's record size
// as bytes/event next to their time and allocations. Nothing is asserted.
func BenchmarkEncode(b *testing.B) {
	r, c := typical()
	for _, e := range []machine.Event{r, c} {
		b.Run(reflect.TypeOf(e).Name(), func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			var err error
			for b.Loop() {
				if buf, err = Encode(buf[:0], e); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(buf)), "bytes/event")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	r, c := typical()
	for _, e := range []machine.Event{r, c} {
		rec, err := Encode(nil, e)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(reflect.TypeOf(e).Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(rec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(rec)), "bytes/event")
		})
	}
}
