package web

import (
	"fmt"
	"html"
	"html/template"
	"math/big"
	"strings"
)

// palette is the Okabe-Ito colour set, told apart by colour-blind readers
// too; series beyond it reuse it.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}

// series is one stacked layer of a bar chart: a name and one value per bar.
type series struct {
	Name   string
	Values []float64
}

// chart is a stacked bar chart rendered as inline SVG: one bar per label,
// each bar the stack of the series' values there.
type chart struct {
	Title  string   // the chart's accessible name
	Labels []string // the x axis, one per bar (dates)
	Series []series
	Unit   string // what the values count ("USD", "tokens"), for the axis and tooltips
}

// decimal returns a decimal string's value as a float64, for drawing only
// (the page shows the exact string); 0 when it is not a number.
func decimal(s string) float64 {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0
	}
	f, _ := r.Float64()
	return f
}

// SVG renders the chart. Geometry is in a 720×260 view box that scales to
// the page's width; every bar segment has a <title> with its exact figure.
func (c chart) SVG() template.HTML {
	const w, h, left, bottom, top = 720.0, 260.0, 64.0, 28.0, 12.0
	var max float64
	for i := range c.Labels {
		var sum float64
		for _, s := range c.Series {
			if i < len(s.Values) {
				sum += s.Values[i]
			}
		}
		max = maxf(max, sum)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="%s">`, w, h, html.EscapeString(c.Title))
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(c.Title))
	plotH := h - bottom - top
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#555"/>`, left, h-bottom, w, h-bottom)
	if max > 0 {
		for _, f := range []float64{0.5, 1} {
			y := h - bottom - plotH*f
			fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ccc" stroke-dasharray="4 4"/>`, left, y, w, y)
			fmt.Fprintf(&b, `<text x="%g" y="%.1f" font-size="14" text-anchor="end" fill="#333">%s</text>`, left-6, y+4, axisLabel(max*f))
		}
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="14" text-anchor="end" fill="#333">0</text>`, left-6, h-bottom+4)
	n := len(c.Labels)
	if n == 0 {
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="14" text-anchor="middle" fill="#333">no usage in this period</text></svg>`, w/2, h/2)
		return template.HTML(b.String())
	}
	slot := (w - left) / float64(n)
	barW := maxf(slot*0.7, 1)
	every := 1 + n/10 // at most about 10 x labels
	for i, label := range c.Labels {
		x := left + slot*float64(i) + (slot-barW)/2
		y := h - bottom
		for si, s := range c.Series {
			if i >= len(s.Values) || s.Values[i] <= 0 || max == 0 {
				continue
			}
			bh := plotH * s.Values[i] / max
			y -= bh
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s %s</title></rect>`,
				x, y, barW, bh, palette[si%len(palette)], html.EscapeString(label), html.EscapeString(s.Name),
				trimFloat(s.Values[i]), html.EscapeString(c.Unit))
		}
		if i%every == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%g" font-size="13" text-anchor="middle" fill="#333">%s</text>`,
				x+barW/2, h-bottom+16, html.EscapeString(shortDate(label)))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// Legend is the series' names with their colours.
func (c chart) Legend() []legendItem {
	out := make([]legendItem, len(c.Series))
	for i, s := range c.Series {
		out[i] = legendItem{Name: s.Name, Colour: palette[i%len(palette)]}
	}
	return out
}

type legendItem struct{ Name, Colour string }

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

// shortDate turns "2026-01-31" into "01-31"; other labels stay.
func shortDate(s string) string {
	if len(s) == 10 && s[4] == '-' {
		return s[5:]
	}
	return s
}

func trimFloat(f float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.6f", f), "0"), ".")
}

// axisLabel formats an axis value compactly: 1.2k, 3.4M.
func axisLabel(f float64) string {
	switch {
	case f >= 1e9:
		return trimFloat(roundTo(f/1e9, 1)) + "G"
	case f >= 1e6:
		return trimFloat(roundTo(f/1e6, 1)) + "M"
	case f >= 1e3:
		return trimFloat(roundTo(f/1e3, 1)) + "k"
	case f >= 1:
		return trimFloat(roundTo(f, 2))
	}
	return trimFloat(roundTo(f, 4))
}

func roundTo(f float64, places int) float64 {
	p := 1.0
	for range places {
		p *= 10
	}
	return float64(int64(f*p+0.5)) / p
}
