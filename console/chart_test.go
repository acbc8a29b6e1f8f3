package console

import (
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
)

// The usage chart has a y axis in credits (0, half and the largest charge), each
// group's name under its bar, bars in proportion, a title per bar with its amount, and
// a legend naming the unit.
func TestUsageChart(t *testing.T) {
	rows := []ledger.UsageRow{{Group: "2026-12-01", Charged: 1_000_000}, {Group: "2026-12-02", Charged: 250_000}, {Group: "a-very-long-model-name", Charged: 0}}
	c := usageChart("day", rows)
	var ticks []string
	for _, tk := range c.Ticks {
		ticks = append(ticks, tk.Label)
	}
	if got := strings.Join(ticks, " "); got != "0 0.5 1" {
		t.Errorf("y ticks %q, want 0 0.5 1", got)
	}
	if c.Bars[0].H != chartPlotHeight || c.Bars[1].H != chartPlotHeight/4 || c.Bars[2].H != 0 || c.Bars[1].Y != c.Bottom-chartPlotHeight/4 {
		t.Errorf("bars %+v", c.Bars)
	}
	if c.Bars[2].Label != "a-very-lo…" {
		t.Errorf("a long group's label %q", c.Bars[2].Label)
	}
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, "usage", page{Title: "Usage", Data: usagePage{Account: "a", By: "day", Rows: rows, Chart: c}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<title id="chart-title">Credits charged per day</title>`, `charged, credits per day</text>`,
		`<title>2026-12-02: 0.250000 credits</title>`, `text-anchor="end">0.5</text>`, `class="axis-title" transform="rotate(-90)"`, `>credits</text>`,
		`<label for="usage-by">By</label>`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the usage page lacks %s:\n%s", want, b.String())
		}
	}
	// No charges: one tick at 0, no division by zero.
	if c := usageChart("model", nil); len(c.Ticks) != 1 || c.Ticks[0].Label != "0" {
		t.Errorf("empty chart ticks %+v", c.Ticks)
	}
}
