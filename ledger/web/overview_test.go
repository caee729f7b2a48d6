package web_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// priced adds a price of 1 per million tokens in and out for model in
// currency, from 2020.
func (g *rig) priced(model, currency string) {
	g.t.Helper()
	if _, err := g.api.CreatePrice(context.Background(), ledger.PriceInput{Model: model, Currency: currency, Input: "1", Output: "1",
		EffectiveFrom: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		g.t.Fatal(err)
	}
}

// spend writes one event now of customer c's first key on model with
// prompt tokens (its cost: tokens/1e6 at priced's price).
func (g *rig) spend(c ledger.Customer, model string, prompt int64) {
	g.t.Helper()
	ctx := context.Background()
	ks, err := g.api.Keys(ctx, c.ID)
	if err != nil || len(ks) == 0 {
		g.t.Fatalf("keys of %s: %v", c.Name, err)
	}
	ev := usage.Event{Version: usage.SchemaVersion, ID: uuid.Must(uuid.NewV7()).String(), Time: time.Now().UTC(),
		CustomerID: c.ID, KeyID: ks[0].ID, Provider: "sim", Model: model, Endpoint: "/v1/chat/completions",
		Status: usage.StatusOK, HTTPStatus: 200, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: prompt}}
	if _, err := g.store.WriteEvents(ctx, []usage.Event{ev}); err != nil {
		g.t.Fatal(err)
	}
}

// TestOverviewSpendChartPerCurrency: the overview's "Spend per day" chart
// stacked a JPY customer's 500 on a USD customer's 2 in one bar, on an
// axis of no unit. Each currency has its own chart, in its unit.
func TestOverviewSpendChartPerCurrency(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	g.priced("m-usd", "USD")
	g.priced("m-jpy", "JPY")
	usd, _, _ := g.customer("dollar", "none", 0)
	jpy, err := g.api.CreateCustomer(ctx, ledger.CustomerInput{Name: "yen", Currency: "JPY"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.api.CreateKey(ctx, jpy.ID, ledger.KeyInput{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	g.spend(usd, "m-usd", 2_000_000)
	g.spend(jpy, "m-jpy", 500_000_000)
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	status, body, _ := g.do(c, "GET", "/console/?fresh=1", nil)
	if status != http.StatusOK {
		t.Fatalf("overview = %d", status)
	}
	day := time.Now().UTC().Format("2006-01-02")
	svgs := regexp.MustCompile(`(?s)<svg class="chart".*?</svg>`).FindAllString(body, -1)
	if len(svgs) != 2 {
		t.Fatalf("the overview has %d charts, want one per currency (2):\n%s", len(svgs), body)
	}
	for i, want := range []struct{ title, bar string }{
		{"Spend per day, this month and the last, in JPY", day + " JPY: 500 JPY"},
		{"Spend per day, this month and the last, in USD", day + " USD: 2 USD"},
	} {
		if !strings.Contains(svgs[i], `aria-label="`+want.title+`"`) || !strings.Contains(svgs[i], want.bar) {
			t.Errorf("chart %d is not %q with the bar %q:\n%s", i, want.title, want.bar, svgs[i])
		}
	}
	for _, s := range svgs {
		if strings.Contains(s, "JPY") && strings.Contains(s, "USD") {
			t.Errorf("a chart holds both currencies:\n%s", s)
		}
	}
}

// TestOverviewFiguresKeepToTheirPeriods: the overview's "today" cards
// count today's usage (UTC) only, its "this month" cards the month's,
// and its spend chart has the days of last month too, each figure exact;
// unpriced usage is counted apart and charted in no currency; the top
// customers list more than one. A mutation audit: today's figures read
// over the whole month, a chart of this month alone, a chart of unpriced
// usage (no unit), uncounted unpriced requests, one top customer, and a
// "today" of the current hour each passed every test.
func TestOverviewFiguresKeepToTheirPeriods(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	g.priced("m", "USD")
	cu, _, _ := g.customer("periods", "none", 0)
	ks, err := g.api.Keys(ctx, cu.ID)
	if err != nil {
		t.Fatal(err)
	}
	now := nowInOneUTCDay() // the events and the pages of one UTC day
	today := now.Truncate(24 * time.Hour)
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	ev := func(at time.Time, prompt int64) usage.Event {
		return usage.Event{Version: usage.SchemaVersion, ID: uuid.Must(uuid.NewV7()).String(), Time: at, CustomerID: cu.ID,
			KeyID: ks[0].ID, Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
			HTTPStatus: 200, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: prompt}}
	}
	lastMonth := monthStart.Add(-time.Hour)
	events := []usage.Event{ev(now, 1_000_000), ev(lastMonth, 4_000_000)} // 1 USD today, 4 USD last month
	wantMonth, wantRequests := "1 USD", "2"
	if today.After(monthStart) { // an earlier day of this month: 2 USD
		events = append(events, ev(today.Add(-time.Hour), 2_000_000))
		wantMonth, wantRequests = "3 USD", "3"
	}
	wantToday, wantRequestsToday := "1 USD", "2"
	if now.Sub(today) > time.Hour+time.Minute { // an earlier hour of today: 8 USD
		events = append(events, ev(today.Add(time.Minute), 8_000_000))
		wantToday, wantRequestsToday = "9 USD", "3"
		wantMonth, wantRequests = map[string]string{"1 USD": "9 USD", "3 USD": "11 USD"}[wantMonth], map[string]string{"2": "3", "3": "4"}[wantRequests]
	}
	if _, err := g.store.WriteEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	g.customer("unpriced", "no-price", 1) // one request now, of no price
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	_, body, _ := g.do(c, "GET", "/console/?fresh=1", nil)
	card := func(id string) string {
		m := regexp.MustCompile(`id="` + id + `">([^<]*)<`).FindStringSubmatch(body)
		if m == nil {
			return "<no card>"
		}
		return m[1]
	}
	for id, want := range map[string]string{"spend-today": wantToday, "requests-today": wantRequestsToday, "spend-month": wantMonth,
		"requests-month": wantRequests} {
		if got := card(id); got != want {
			t.Errorf("the overview's %s reads %q, want %q", id, got, want)
		}
	}
	if bar := lastMonth.Format("2006-01-02") + " USD: 4 USD"; !strings.Contains(body, bar) {
		t.Errorf("the spend chart lacks last month's bar %q", bar)
	}
	if !strings.Contains(body, `id="unpriced"><a href="/console/prices">1</a>`) {
		t.Errorf("the overview's unpriced card does not read 1")
	}
	if n := strings.Count(body, `<svg class="chart"`); n != 1 {
		t.Errorf("the overview has %d spend charts, want 1 (USD; unpriced usage has no currency)", n)
	}
	top := body[strings.Index(body, `id="top-customers"`):]
	if top = top[:strings.Index(top, "</table>")]; !strings.Contains(top, ">periods<") || !strings.Contains(top, ">unpriced<") {
		t.Errorf("the top customers do not list both customers:\n%s", top)
	}
}
