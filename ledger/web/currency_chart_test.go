package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestChartsKeepToOneCurrency: a USD customer with a custom EUR price for
// one model (the documented way to serve it another currency's model) has
// usage in two currencies. The portal's and the console's "cost per day by
// model" charts chart the currency it was charged most in and name the
// other in their title, never summing both into one bar under one unit.
// (Found by a review: the EUR model's 2 EUR showed as "2 USD".)
func TestChartsKeepToOneCurrency(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	from := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := g.api.CreatePrice(ctx, ledger.PriceInput{Model: "usd-model", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: from}); err != nil {
		t.Fatal(err)
	}
	c, secret, _ := g.customer("acme", "none", 0)
	if _, err := g.api.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "eur-model", EffectiveFrom: from,
		Price: &ledger.PriceInput{Currency: "EUR", Input: "1", Output: "1"}}); err != nil {
		t.Fatal(err)
	}
	ks, err := g.api.Keys(ctx, c.ID)
	if err != nil || len(ks) != 1 {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	ev := func(model string, tokens int64) usage.Event {
		return usage.Event{Version: usage.SchemaVersion, ID: uuid.Must(uuid.NewV7()).String(), Time: now,
			CustomerID: c.ID, KeyID: ks[0].ID, Provider: "sim", Model: model, Endpoint: "/v1/chat/completions",
			Status: usage.StatusOK, HTTPStatus: 200, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: tokens}}
	}
	if _, err := g.api.CreatePrice(ctx, ledger.PriceInput{Model: "usd-model-2", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: from}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.store.WriteEvents(ctx, []usage.Event{ev("usd-model", 1_000_000), ev("usd-model-2", 3_000_000), ev("eur-model", 2_000_000)}); err != nil {
		t.Fatal(err)
	}
	day := now.Format("2006-01-02")

	portal := g.browser()
	g.signIn(portal, "portal", "key", secret)
	status, body, _ := g.do(portal, "GET", "/portal/", nil)
	if status != http.StatusOK {
		t.Fatalf("portal = %d", status)
	}
	checkChart(t, "portal", body, day)

	console := g.browser()
	g.signIn(console, "console", "token", adminToken)
	status, body, _ = g.do(console, "GET", "/console/customers/"+c.ID, nil)
	if status != http.StatusOK {
		t.Fatalf("console customer = %d", status)
	}
	checkChart(t, "console", body, day)
}

// checkChart checks a page's cost-per-day-by-model chart holds the USD
// models in USD, not the EUR one, and names EUR as left to the tables.
func checkChart(t *testing.T, page, body, day string) {
	t.Helper()
	for _, want := range []string{day + " usd-model: 1 USD", day + " usd-model-2: 3 USD", "charges in EUR are in the tables"} {
		if !strings.Contains(body, want) {
			t.Errorf("%s chart lacks %q", page, want)
		}
	}
	if strings.Contains(body, day+" eur-model: 2") {
		t.Errorf("%s chart sums the EUR model's 2 EUR with USD", page)
	}
}
