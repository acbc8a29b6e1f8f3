package main

import (
	"math"
	"strings"
	"testing"
)

// The summary of several runs takes each figure's median (the mean of the middle two
// for an even count), leaves out unknown figures, sums the requests, and prints the
// spread of the added latency and CPU.
func TestMedianAndRanges(t *testing.T) {
	mk := func(added50, cpu0, ops float64, ok int) row {
		return row{code: "after", rate: 1000, added50: added50, cpu: [5]float64{cpu0, 0.3, 0.2, 0.4, 0.1},
			switches: [5]float64{10 * cpu0, 9, 8, 7, 6}, operationsPerTransact: ops, ok: ok, sent: 100,
			reserve: [2]float64{added50 / 2, 10 * cpu0}, twoHops: cpu0}
	}
	runs := []row{mk(5, 0.30, 4, 100), mk(7, 0.34, math.NaN(), 99), mk(6, 0.32, 5, 100)}
	m := median(runs)
	if m.added50 != 6 || m.cpu[0] != 0.32 || m.switches[0] != 3.2 || m.operationsPerTransact != 4.5 || m.ok != 299 || m.sent != 300 {
		t.Errorf("median = %+v", m)
	}
	if got := median(runs[:2]).added50; got != 6 {
		t.Errorf("median of two = %v, want 6", got)
	}
	unknown := mk(1, 1, math.NaN(), 1)
	unknown.reserve, unknown.twoHops = [2]float64{math.NaN(), math.NaN()}, math.NaN()
	if got := median([]row{unknown}); !math.IsNaN(got.operationsPerTransact) || !strings.HasSuffix(got.String(), "| n/a | n/a / n/a ms | n/a |") {
		t.Errorf("unknown figures: %v, %q", got.operationsPerTransact, got.String())
	}
	r := ranges(runs)
	for _, want := range []string{"after, 1000 rps, 3 runs", "added p50 5.00–7.00", "CPU per request 0.30–0.34 / 0.30–0.30"} {
		if !strings.Contains(r, want) {
			t.Errorf("ranges = %q, lacks %q", r, want)
		}
	}
	if s := m.String(); !strings.Contains(s, "| after | 1000 rps |") || !strings.Contains(s, "99.67 % (299 of 300)") ||
		!strings.Contains(s, "| 0.32 / 0.30 / 0.20 / 0.40 / 0.10 ms | 3.2 / 9.0 / 8.0 / 7.0 / 6.0 |") || !strings.HasSuffix(s, "| 4.5 | 3.00 / 3.20 ms | 0.32 % |") {
		t.Errorf("row = %q", s)
	}
}
