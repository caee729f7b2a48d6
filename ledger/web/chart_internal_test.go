package web

import (
	"slices"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestChartShowsExactAmounts: a bar's tooltip shows the amount exactly as
// the API gave it (a float with six places showed 0.0002625 as 0.000263),
// and the geometry and axis come from the exact sums.
func TestChartShowsExactAmounts(t *testing.T) {
	c := chart{Title: "t", Labels: []string{"2026-01-01", "2026-01-02"}, Unit: "USD", Series: []series{
		{Name: "a", Values: []decimal.Decimal{amount("0.0002625"), amount("0.1")}},
		{Name: "b", Values: []decimal.Decimal{amount("0.0997375"), amount("0")}},
	}}
	svg := string(c.SVG())
	for _, want := range []string{
		"2026-01-01 a: 0.0002625 USD", "2026-01-01 b: 0.0997375 USD", "2026-01-02 a: 0.1 USD",
		`height="220.0"`,              // a whole bar of the peak, 0.1: the plot's height
		`>0.1</text>`, `>0.05</text>`, // the axis at the peak and its half
		`y="231.4" width="229.6" height="0.6"`, // 0.0002625 of 0.1 is 0.5775 of 220 units: 0.6
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q:\n%s", want, svg)
		}
	}
	if strings.Contains(svg, "2026-01-02 b:") {
		t.Error("a zero value drew a segment")
	}
}

// TestAxisLabel: labels below 1 keep three significant digits, in at most
// 7 characters. Rounded to 4 decimals, a chart of small amounts read
// "0 / 0 / 0" (peak, half, 0).
func TestAxisLabel(t *testing.T) {
	for in, want := range map[string]string{"1234": "1.2k", "3450000": "3.5M", "2000000000": "2G", "12.345": "12.35", "0.00026": "2.6e-4", "0": "0",
		"0.000012345": "1.23e-5", "0.0000061725": "6.17e-6", "0.5": "0.5", "0.123456": "0.123", "0.0012345": "0.00123",
		"0.0000000000000001": "1e-16", "0.00099999": "1e-3", "0.0099999": "0.01"} {
		if got := axisLabel(amount(in)); got != want {
			t.Errorf("axisLabel(%s) = %s, want %s", in, got, want)
		}
	}
	// A gridline below the peak is written at the peak's scale.
	for _, c := range []struct{ half, peak, want string }{
		{"0.00072", "0.00144", "0.00072"}, {"0.0000718", "0.0001436", "0.72e-4"}, {"0.25", "0.5", "0.25"},
		{"0.6", "1.2", "0.6"}, {"750", "1500", "750"}, {"0.0004999995", "0.000999999", "0.5e-3"},
	} {
		if got := axisLabelOf(amount(c.half), amount(c.peak)); got != c.want {
			t.Errorf("axisLabelOf(%s, peak %s) = %s, want %s", c.half, c.peak, got, c.want)
		}
	}
	// The gridlines of a chart whose peak is 0.00003 USD.
	svg := string(chart{Title: "t", Labels: []string{"2026-01-01"}, Unit: "USD",
		Series: []series{{Name: "a", Values: []decimal.Decimal{amount("0.00003")}}}}.SVG())
	for _, want := range []string{">3e-5</text>", ">1.5e-5</text>", ">0</text>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart's axis lacks %q:\n%s", want, svg)
		}
	}
}

// TestTopRanksWithinACurrency: the overview's top customers were ranked by
// their cost's face value across currencies, 0.0093 JPY above 0.0019 USD
// (found by review). Rows are ranked within their currency, the currency
// with the most requests first.
func TestTopRanksWithinACurrency(t *testing.T) {
	rows := []ledger.UsageRow{
		{Group: "jpy-co", Currency: "JPY", Cost: "0.0093", Requests: 2},
		{Group: "acme", Currency: "USD", Cost: "0.0019", Requests: 50},
		{Group: "big", Currency: "USD", Cost: "12.5", Requests: 40},
		{Group: "eur-co", Currency: "EUR", Cost: "3", Requests: 5},
	}
	var got []string
	for _, r := range top(rows, 3) {
		got = append(got, r.Group)
	}
	if want := []string{"big", "acme", "eur-co"}; !slices.Equal(got, want) {
		t.Errorf("top 3 = %v, want %v: USD (90 requests) ranked by cost, then EUR (5), then JPY (2)", got, want)
	}
}

// TestChartEscapesNames: a chart is HTML built by hand, outside the
// templates' escaping, and its series are model names a customer's
// requests chose: a model named <script>… is shown as text in the SVG
// (title, tooltips, labels), never as markup on the operator's or the
// customer's page. A mutation audit: dropping any of the chart's escapes
// passed every test.
func TestChartEscapesNames(t *testing.T) {
	const evil = `<script>alert("x")</script>`
	c := chart{Title: "t" + evil, Labels: []string{"day" + evil}, Unit: "USD" + evil, Series: []series{
		{Name: "m" + evil, Values: []decimal.Decimal{amount("1")}},
	}}
	svg := string(c.SVG())
	if strings.Contains(svg, "<script") {
		t.Errorf("the chart has unescaped markup:\n%s", svg)
	}
	if n := strings.Count(svg, "&lt;script&gt;"); n < 5 {
		t.Errorf("the chart shows the names escaped %d times, want 5 (title twice, label, series, unit):\n%s", n, svg)
	}
}
