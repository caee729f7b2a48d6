package web

import (
	"fmt"
	"html"
	"html/template"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
)

// palette is the Okabe-Ito colour set, told apart by colour-blind readers
// too; series beyond it reuse it.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}

// series is one stacked layer of a bar chart: a name and one value per
// bar, exact (costs are summed as the decimal strings the API gives).
type series struct {
	Name   string
	Values []decimal.Decimal
}

// chart is a stacked bar chart rendered as inline SVG: one bar per label,
// each bar the stack of the series' values there.
type chart struct {
	Title  string   // the chart's accessible name
	Labels []string // the x axis, one per bar (dates)
	Series []series
	Unit   string // what the values count ("USD", "tokens"), for the axis and tooltips
}

// amount returns a decimal string's value (an API amount), or 0 when it
// is not a number.
func amount(s string) decimal.Decimal {
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Zero
	}
	return d
}

// SVG renders the chart. Geometry is in a 720×260 view box that scales to
// the page's width, in tenths of a unit computed from the exact values;
// every bar segment has a <title> with its exact figure.
func (c chart) SVG() template.HTML {
	const w, h, left, bottom, top = 720, 260, 64, 28, 12
	const plotH = h - bottom - top
	peak := decimal.Zero
	for i := range c.Labels {
		sum := decimal.Zero
		for _, s := range c.Series {
			if i < len(s.Values) {
				sum = sum.Add(s.Values[i])
			}
		}
		peak = decimal.Max(peak, sum)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s">`, w, h, html.EscapeString(c.Title))
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(c.Title))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555"/>`, left, h-bottom, w, h-bottom)
	if peak.IsPositive() {
		for _, f := range []decimal.Decimal{decimal.New(5, -1), decimal.New(1, 0)} {
			y := decimal.New(h-bottom, 0).Sub(decimal.New(plotH, 0).Mul(f)).StringFixed(1)
			fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#ccc" stroke-dasharray="4 4"/>`, left, y, w, y)
			fmt.Fprintf(&b, `<text x="%d" y="%s" font-size="14" text-anchor="end" fill="#333">%s</text>`, left-6,
				decimal.RequireFromString(y).Add(decimal.New(4, 0)).StringFixed(1), axisLabelOf(peak.Mul(f), peak))
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14" text-anchor="end" fill="#333">0</text>`, left-6, h-bottom+4)
	n := len(c.Labels)
	if n == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14" text-anchor="middle" fill="#333">no usage in this period</text></svg>`, w/2, h/2)
		return template.HTML(b.String())
	}
	// Horizontal geometry in tenths of a unit: slot, bar width, x.
	slot := (w - left) * 10 / n
	barW := max(slot*7/10, 10)
	every := 1 + n/10 // at most about 10 x labels
	for i, label := range c.Labels {
		x := left*10 + slot*i + (slot-barW)/2
		y := decimal.New(h-bottom, 0)
		for si, s := range c.Series {
			if i >= len(s.Values) || !s.Values[i].IsPositive() || !peak.IsPositive() {
				continue
			}
			bh := decimal.New(plotH, 0).Mul(s.Values[i]).DivRound(peak, 1)
			y = y.Sub(bh)
			fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s %s: %s %s</title></rect>`,
				tenths(x), y.StringFixed(1), tenths(barW), bh.StringFixed(1), palette[si%len(palette)], html.EscapeString(label),
				html.EscapeString(s.Name), s.Values[i].String(), html.EscapeString(c.Unit))
		}
		if i%every == 0 {
			fmt.Fprintf(&b, `<text x="%s" y="%d" font-size="13" text-anchor="middle" fill="#333">%s</text>`,
				tenths(x+barW/2), h-bottom+16, html.EscapeString(shortDate(label)))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// tenths formats n tenths of a unit ("123.4").
func tenths(n int) string { return decimal.New(int64(n), -1).StringFixed(1) }

// Legend is the series' names with their colours.
func (c chart) Legend() []legendItem {
	out := make([]legendItem, len(c.Series))
	for i, s := range c.Series {
		out[i] = legendItem{Name: s.Name, Colour: palette[i%len(palette)]}
	}
	return out
}

type legendItem struct{ Name, Colour string }

// shortDate turns "2026-01-31" into "01-31"; other labels stay.
func shortDate(s string) string {
	if len(s) == 10 && s[4] == '-' {
		return s[5:]
	}
	return s
}

// axisLabel formats an axis value compactly, rounded half up, to at most
// 7 characters (the axis's margin): 1.2k, 3.4M, 12.35, and below 1 to
// three significant digits, 0.123, 0.00123, then 1.23e-4, so that the
// gridlines of the smallest amounts (the peak and its half) are told
// apart and from 0.
func axisLabel(d decimal.Decimal) string { return axisLabelOf(d, d) }

// axisLabelOf formats d, a gridline's value on an axis whose peak is peak,
// as axisLabel formats peak, at peak's scale below 1: the half of 0.00144
// is 0.00072 (not 7.2e-4), the half of 1.44e-4 is 0.72e-4, so that the two
// gridlines read alike (a browser review saw 0.00144 over 7.18e-4).
func axisLabelOf(d, peak decimal.Decimal) string {
	for _, u := range []struct {
		exp    int32
		suffix string
	}{{9, "G"}, {6, "M"}, {3, "k"}} {
		if d.GreaterThanOrEqual(decimal.New(1, u.exp)) {
			return d.Shift(-u.exp).Round(1).String() + u.suffix
		}
	}
	if d.GreaterThanOrEqual(decimal.New(1, 0)) || peak.GreaterThanOrEqual(decimal.New(1, 0)) {
		return d.Round(2).String()
	}
	if !d.IsPositive() || !peak.IsPositive() {
		return d.String()
	}
	// peak is m×10^-n with 1 <= m < 10.
	n := int32(1)
	for peak.Shift(n).LessThan(decimal.New(1, 0)) {
		n++
	}
	if n <= 3 {
		return d.Round(n + 2).String()
	}
	if peak.Shift(n).Round(2).GreaterThanOrEqual(decimal.New(10, 0)) {
		n-- // peak rounds up to the next power of ten
	}
	return d.Shift(n).Round(2).String() + "e-" + strconv.Itoa(int(n))
}
