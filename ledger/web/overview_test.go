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
