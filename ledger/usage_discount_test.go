package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestUsageFromTheEventsIsAfterDiscounts: usage read from the events (by
// end user, by deployment or provider, and the parts of an hour at a
// bound that is not whole) has the same cost as usage read from the
// rollups: the charge after the customer's discount (README, "cost after
// discounts and re-rating"), never the list cost.
func TestUsageFromTheEventsIsAfterDiscounts(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{DiscountPercent: "25", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 10, 12, 30, 0, 0, time.UTC)
	e := newEvent(c.ID, k.ID, "m", at, usage.Tokens{PromptTokens: 1000, CompletionTokens: 500})
	e.EndUser = "u-1"
	if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
		t.Fatal(err)
	}
	// List: 1000×1 + 500×2 = 2000 µ = 0.002; charged 75% of it.
	const want = "0.0015"
	for _, q := range []ledger.UsageQuery{
		{GroupBy: "model", From: jan, To: jan.AddDate(1, 0, 0)},                                            // the rollups
		{GroupBy: "end_user", From: jan, To: jan.AddDate(1, 0, 0)},                                         // the events
		{GroupBy: "model", EndUser: "u-1", From: jan, To: jan.AddDate(1, 0, 0)},                            // the events
		{GroupBy: "deployment", From: jan, To: jan.AddDate(1, 0, 0)},                                       // the events and attempts
		{GroupBy: "model", From: at.Add(-time.Minute), To: at.Add(time.Minute)},                            // the parts of an hour
		{GroupBy: "model", From: at.Truncate(time.Hour), To: at.Truncate(time.Hour).Add(90 * time.Minute)}, // whole hour and a part
	} {
		q.CustomerID = c.ID
		page, err := s.Usage(ctx, q)
		if err != nil {
			t.Fatalf("Usage(%+v): %v", q, err)
		}
		if len(page.Data) != 1 || page.Data[0].Requests != 1 || page.Data[0].Cost != want || page.Data[0].Currency != "USD" {
			t.Errorf("Usage by %s (end user %q, %s to %s) = %+v; want one request costing %s USD",
				q.GroupBy, q.EndUser, q.From.Format(time.TimeOnly), q.To.Format(time.TimeOnly), page.Data, want)
		}
	}
}
