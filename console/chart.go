package console

// The usage chart: an inline SVG drawn on the server (the console runs no script),
// with a y axis in credits (ticks at 0, half and the top), the groups along the x
// axis, a legend, and each bar titled with its group and amount for screen readers.

import (
	"github.com/llmgw/gateway/accounting/ledger"
)

// chart is the usage chart's geometry.
type chart struct {
	// Width and Height are the drawing's size; Left, Bottom the plot's origin, Top and
	// Right its other edges; LabelY the baseline of the groups' names, MidX and MidY
	// the plot's middle (where the axes' titles are centred), TitleY the x title's
	// baseline.
	Width, Height, Left, Top, Bottom, Right int
	LabelY, MidX, MidY, TitleY              int
	// Group names the x axis (day, model, key, channel).
	Group string
	Bars  []bar
	Ticks []tick
}

// bar is one bar: its group, amount in credits, and where it is drawn.
type bar struct {
	Label, Credits  string
	X, Y, W, H, Mid int
}

// tick is a y-axis mark at height Y reading Label credits (its text's baseline at
// TextY).
type tick struct {
	Y, TextY int
	Label    string
}

const (
	chartPlotHeight = 160
	chartBarWidth   = 36
	chartStep       = 70
)

// usageChart lays out one bar per row, scaled to the largest charge.
func usageChart(group string, rows []ledger.UsageRow) chart {
	c := chart{Left: 90, Top: 30, Group: group}
	c.Bottom = c.Top + chartPlotHeight
	c.Height = c.Bottom + 40
	c.Width = max(420, c.Left+len(rows)*chartStep+20)
	c.Right, c.LabelY, c.TitleY = c.Width-10, c.Bottom+14, c.Height-6
	c.MidX, c.MidY = (c.Left+c.Right)/2, (c.Top+c.Bottom)/2
	var top int64
	for _, row := range rows {
		top = max(top, row.Charged)
	}
	for _, f := range []int64{0, 1, 2} {
		v := top * f / 2
		y := c.Bottom
		if top > 0 {
			y = c.Bottom - int(v*chartPlotHeight/top)
		}
		c.Ticks = append(c.Ticks, tick{Y: y, TextY: y + 3, Label: ledger.FormatCredits(v)})
		if top == 0 {
			break
		}
	}
	for i, row := range rows {
		h := 0
		if top > 0 {
			h = int(row.Charged * chartPlotHeight / top)
		}
		x := c.Left + 10 + i*chartStep
		label := row.Group
		if r := []rune(label); len(r) > 10 {
			label = string(r[:9]) + "…"
		}
		c.Bars = append(c.Bars, bar{Label: label, Credits: ledger.FormatCredits6(row.Charged), X: x, Y: c.Bottom - h, W: chartBarWidth, H: h,
			Mid: x + chartBarWidth/2})
	}
	return c
}
