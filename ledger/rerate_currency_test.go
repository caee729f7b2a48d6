package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRerateLeavesAnEventWhoseCurrencyWouldChange: an event charged in one
// currency that the terms now in force would price in another is left
// alone and counted (CurrencyConflicts: "those need a manual adjustment"):
// a rerate entry in the new currency for the difference from a charge in
// the old one would bill a sum in one currency against money kept in
// another, and the old charge would stand beside it.
func TestRerateLeavesAnEventWhoseCurrencyWouldChange(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	at := jan.AddDate(0, 2, 9)
	e := newEvent(c.ID, k.ID, "m", at, usage.Tokens{PromptTokens: 1000, CompletionTokens: 500})
	if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "m",
		Price: &ledger.PriceInput{Currency: "EUR", Input: "5", Output: "5"}, EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Balance(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Rerate(ctx, jan, jan.AddDate(1, 0, 0), nil)
	if err != nil || res.Examined != 1 || res.CurrencyConflicts != 1 || res.Adjusted != 0 {
		t.Fatalf("Rerate = %+v, %v; want the event examined, a currency conflict and nothing adjusted", res, err)
	}
	after, err := s.Balance(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Charges != before.Charges || after.Charges != "0.002" {
		t.Fatalf("balance after the rerate %+v, before %+v; want the USD charge of 0.002 alone", after, before)
	}
	if ev, err := s.Event(ctx, e.ID); err != nil || ev.Cost != "0.002" || ev.Currency != "USD" {
		t.Fatalf("event after the rerate %+v, %v; want it charged 0.002 USD still", ev, err)
	}
	if rows := usageByMonth(t, s, c.ID); len(rows) != 1 || rows["2026-03/USD"].Cost != "0.002" {
		t.Fatalf("usage after the rerate %+v; want March's USD row alone", rows)
	}
}
