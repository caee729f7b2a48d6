package api_test

import (
	"bytes"
	"encoding/csv"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestCostIsTheChargeEverywhere: cost is what the customer is charged
// (after overrides and discounts) in the event, the admin usage and the
// customer usage alike; the price before discount is list_cost, in the
// event and in the export.
func TestCostIsTheChargeEverywhere(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, key, secret := s.customer(`{"name":"acme"}`)
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"2","output":"8","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/customers/"+cust+"/overrides", `{"model":"","discount_percent":"12.5","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	e := event(cust, key, "m", time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC), usage.Tokens{PromptTokens: 1000, CompletionTokens: 500})
	s.write(e)

	// 1000 × 2 + 500 × 8 = 6000 µ = 0.006 at list; 12.5% off: 0.00525.
	var ev ledger.RatedEvent
	s.adm("GET", "/admin/v1/events/"+e.ID, "", http.StatusOK, &ev)
	if ev.ListCost != "0.006" || ev.DiscountBP != 1250 || ev.Charge != "0.00525" || ev.Cost != "0.00525" || ev.Currency != "USD" {
		t.Errorf("event = list_cost %s, discount %d, charge %s, cost %s %s; want 0.006, 1250, 0.00525, 0.00525 USD",
			ev.ListCost, ev.DiscountBP, ev.Charge, ev.Cost, ev.Currency)
	}
	var adminPage, selfPage ledger.UsagePage
	s.adm("GET", "/admin/v1/usage?customer_id="+cust, "", http.StatusOK, &adminPage)
	s.call("GET", s.llm+"/v1/usage", secret, "", http.StatusOK, &selfPage)
	for what, p := range map[string]ledger.UsagePage{"admin usage": adminPage, "customer usage": selfPage} {
		if len(p.Data) != 1 || p.Data[0].Cost != ev.Cost {
			t.Errorf("%s = %+v, want one row at cost %s", what, p.Data, ev.Cost)
		}
	}

	b := s.adm("GET", "/admin/v1/export?from=2026-01-01&to=2026-02-01", "", http.StatusOK, nil)
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil || len(recs) != 2 {
		t.Fatalf("export: %v, %d records", err, len(recs))
	}
	header, row := recs[0], recs[1]
	col := slices.Index(header, "list_cost")
	if slices.Contains(header, "cost") || col < 0 || row[col] != "0.006" || row[slices.Index(header, "charge")] != "0.00525" {
		t.Errorf("export: header %q row %q; want list_cost 0.006, charge 0.00525, no column named cost", header, row)
	}
}
