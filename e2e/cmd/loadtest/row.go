package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// row is what one rate measured in one run: latencies in milliseconds, CPU per request
// in milliseconds and context switches per request by part (the front, extproc,
// accounting, PostgreSQL, the load generator), peak RSS in MB by process, the ledger
// operations per transaction, and a Reserve's mean time in milliseconds as extproc saw it
// (its call, the network and accounting's queue included) and as accounting served it,
// and the share of accounting's calls that took two hops (a standby forwarded them or
// named the owner), in percent (NaN when unknown).
type row struct {
	code                  string // which checkout ran ("" when only one did)
	rate                  int
	p50, p90, p99, p999   float64
	direct50, direct99    float64
	added50, added99      float64
	ok, sent              int
	cpu                   [5]float64
	switches              [5]float64
	rss                   [3]float64
	operationsPerTransact float64
	reserve               [2]float64
	twoHops               float64
}

// header is the table's first two lines; parts names the front, extproc and accounting.
func header(parts []string, withCode bool) string {
	code, sep := "", ""
	if withCode {
		code, sep = "code | ", "---|"
	}
	return "| " + code + "rate | gateway p50 / p90 / p99 / p99.9 | direct p50 / p99 | added p50 / p99 | success | CPU per request: " +
		strings.Join(parts, " / ") + " / postgres / " + generator + " | context switches per request: " +
		strings.Join(parts, " / ") + " / postgres / " + generator + " | peak RSS: " + strings.Join(parts, " / ") +
		" | ledger operations per transaction | Reserve (mean): extproc's call / accounting's | calls taking two hops |\n|" + sep + "---|---|---|---|---|---|---|---|---|---|---|"
}

func (r row) String() string {
	code := ""
	if r.code != "" {
		code = r.code + " | "
	}
	f := func(x float64) string { return fmt.Sprintf("%.2f", x) }
	var cpu, switches, rss []string
	for _, c := range r.cpu {
		cpu = append(cpu, f(c))
	}
	for _, n := range r.switches {
		switches = append(switches, fmt.Sprintf("%.1f", n))
	}
	for _, m := range r.rss {
		rss = append(rss, fmt.Sprintf("%.0f MB", m))
	}
	known := func(x float64, format string) string {
		if math.IsNaN(x) {
			return "n/a"
		}
		return fmt.Sprintf(format, x)
	}
	return fmt.Sprintf("| %s%d rps | %s / %s / %s / %s ms | %s / %s ms | %s / %s ms | %.2f %% (%d of %d) | %s ms | %s | %s | %s | %s / %s ms | %s |",
		code, r.rate, f(r.p50), f(r.p90), f(r.p99), f(r.p999), f(r.direct50), f(r.direct99),
		f(r.added50), f(r.added99), 100*float64(r.ok)/float64(max(r.sent, 1)), r.ok, r.sent,
		strings.Join(cpu, " / "), strings.Join(switches, " / "), strings.Join(rss, " / "),
		known(r.operationsPerTransact, "%.1f"), known(r.reserve[0], "%.2f"), known(r.reserve[1], "%.2f"),
		known(r.twoHops, "%.2f %%"))
}

// median is the rows of several runs of one code and rate in one row: the median of
// every figure (the requests counted, summed).
func median(runs []row) row {
	med := func(get func(row) float64) float64 {
		var v []float64
		for _, r := range runs {
			if x := get(r); !math.IsNaN(x) {
				v = append(v, x)
			}
		}
		if len(v) == 0 {
			return math.NaN()
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	m := row{code: runs[0].code, rate: runs[0].rate}
	m.p50, m.p90 = med(func(r row) float64 { return r.p50 }), med(func(r row) float64 { return r.p90 })
	m.p99, m.p999 = med(func(r row) float64 { return r.p99 }), med(func(r row) float64 { return r.p999 })
	m.direct50, m.direct99 = med(func(r row) float64 { return r.direct50 }), med(func(r row) float64 { return r.direct99 })
	m.added50, m.added99 = med(func(r row) float64 { return r.added50 }), med(func(r row) float64 { return r.added99 })
	for i := range m.cpu {
		m.cpu[i] = med(func(r row) float64 { return r.cpu[i] })
		m.switches[i] = med(func(r row) float64 { return r.switches[i] })
	}
	for i := range m.rss {
		m.rss[i] = med(func(r row) float64 { return r.rss[i] })
	}
	m.operationsPerTransact = med(func(r row) float64 { return r.operationsPerTransact })
	for i := range m.reserve {
		m.reserve[i] = med(func(r row) float64 { return r.reserve[i] })
	}
	m.twoHops = med(func(r row) float64 { return r.twoHops })
	for _, r := range runs {
		m.ok, m.sent = m.ok+r.ok, m.sent+r.sent
	}
	return m
}

// ranges says how far apart the runs of one code and rate were: the added latency and
// the CPU per request, lowest–highest.
func ranges(runs []row) string {
	span := func(get func(row) float64) string {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range runs {
			lo, hi = min(lo, get(r)), max(hi, get(r))
		}
		return fmt.Sprintf("%.2f–%.2f", lo, hi)
	}
	var cpu []string
	for i := range runs[0].cpu {
		cpu = append(cpu, span(func(r row) float64 { return r.cpu[i] }))
	}
	label := fmt.Sprintf("%d rps", runs[0].rate)
	if runs[0].code != "" {
		label = runs[0].code + ", " + label
	}
	return fmt.Sprintf("%s, %d runs: added p50 %s, p99 %s ms; CPU per request %s ms", label, len(runs),
		span(func(r row) float64 { return r.added50 }), span(func(r row) float64 { return r.added99 }),
		strings.Join(cpu, " / "))
}
